"""Errors a user can fix. The message is shown as-is in the page and on the CLI (exit 2)."""


class UserError(Exception):
    """A problem with the user's input or setup, stated in one sentence with how to fix it."""


class Cancelled(Exception):
    """Raised by a job when it stops because the user asked it to."""


def shorten(value: object, limit: int = 40) -> str:
    """A value as an error message quotes it: strings in quotes, anything cut to `limit` characters (a pasted
    megabyte must not become a megabyte-long error line)."""
    text = f"'{value}'" if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
