"""Errors a user can fix. The message is shown as-is in the page and on the CLI (exit 2)."""


class UserError(Exception):
    """A problem with the user's input or setup, stated in one sentence with how to fix it."""


class Cancelled(Exception):
    """Raised by a job when it stops because the user asked it to."""
