"""Errors a user can fix. The message is shown as-is in the page and on the CLI (exit 2)."""

from __future__ import annotations

import errno
from pathlib import Path


class UserError(Exception):
    """A problem with the user's input or setup, stated in one sentence with how to fix it."""


class Cancelled(Exception):
    """Raised by a job when it stops because the user asked it to."""


def shorten(value: object, limit: int = 40) -> str:
    """A value as an error message quotes it: repr, so a line break or control character in it cannot split the
    message into lines, cut to `limit` characters (a pasted megabyte must not become a megabyte-long error line)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int past Python's digit limit, a list nested too deep to print
        text = f"<a very large {type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def os_error(exc: OSError, path: Path | str, doing: str) -> UserError:
    """An OSError while `doing` something with `path` as one line naming both: a full disk, a missing permission
    or a file where a folder belongs is the user's to fix, not a traceback."""
    reason = "the disk is full; free some space and try again" if exc.errno == errno.ENOSPC else (
        exc.strerror or str(exc) or type(exc).__name__)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return UserError(f"Could not {doing} {path}{where}: {reason}.")
