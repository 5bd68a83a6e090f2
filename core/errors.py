"""Errors a user can fix. The message is shown as-is in the page and on the CLI (exit 2)."""

from __future__ import annotations

import errno
import math
import os
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


def env_seconds(name: str, default: float, meaning: str) -> float:
    """The environment variable `name` as a number of seconds, `default` when unset or empty; a UserError saying
    `meaning` for a value that is not a finite number, 0 or more (a typo must not become a crash or a wait of NaN)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise UserError(f"{name} must be {meaning}, got {shorten(text)}.")
    return value


def os_error(exc: OSError, path: Path | str, doing: str) -> UserError:
    """An OSError while `doing` something with `path` as one line naming both: a full disk, a missing permission
    or a file where a folder belongs is the user's to fix, not a traceback."""
    reason = "the disk is full; free some space and try again" if exc.errno == errno.ENOSPC else (
        exc.strerror or str(exc) or type(exc).__name__)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return UserError(f"Could not {doing} {path}{where}: {reason}.")
