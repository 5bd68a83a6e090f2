"""Turning core's callbacks and errors into page elements: a progress bar with ETA, and error boxes."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st

from core.errors import UserError

_log = logging.getLogger("contrastlab.ui")
_MIN_UPDATE_S = 0.2  # each update is a websocket message; batches can finish far faster than that


class ProgressBar:
    """A core PhaseProgress (label, done, total) drawn as one st.progress with the phase, counts and ETA.

    The ETA is per phase: phases (e.g. encoding train, then test) have different sizes and speeds.
    """

    def __init__(self, text: str = "Starting…") -> None:
        self._bar = st.progress(0.0, text=text)
        self._phase: str | None = None
        self._started = self._shown = 0.0

    def __call__(self, label: str, done: int, total: int) -> None:
        now = time.monotonic()
        if label != self._phase:
            self._phase, self._started = label, now
        elif now - self._shown < _MIN_UPDATE_S and done < total:
            return
        self._shown = now
        fraction = min(done / total, 1.0) if total else 1.0
        self._bar.progress(fraction, text=f"{label}: {done:,} / {total:,}{_eta(now - self._started, fraction)}")

    def clear(self) -> None:
        self._bar.empty()


def _eta(elapsed: float, fraction: float) -> str:
    if fraction <= 0 or fraction >= 1 or elapsed < 0.5:
        return ""
    left = elapsed * (1 - fraction) / fraction
    return f" · about {left:.0f} s left" if left < 90 else f" · about {left / 60:.0f} min left"


@contextmanager
def progress_bar(text: str = "Starting…") -> Iterator[ProgressBar]:
    """A ProgressBar that disappears when the block ends, however it ends."""
    bar = ProgressBar(text)
    try:
        yield bar
    finally:
        bar.clear()


@dataclass
class Outcome:
    failed: bool = False


@contextmanager
def guard(action: str = "This step") -> Iterator[Outcome]:
    """Run a block and show what went wrong in the page instead of a traceback; the page goes on.

    A UserError shows its one-line message. Anything else shows a short error with the details in a
    closed expander (and the server log). st.stop / st.rerun / page switches derive from BaseException,
    so they pass through untouched. Check `.failed` after the block to skip what depended on it.
    """
    outcome = Outcome()
    try:
        yield outcome
    except UserError as exc:
        outcome.failed = True
        st.error(str(exc))
    except Exception as exc:
        outcome.failed = True
        _log.exception("%s failed", action)
        summary = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        st.error(f"{action} failed unexpectedly ({type(exc).__name__}{': ' + summary if summary else ''}).")
        with st.expander("Details"):
            st.code("".join(traceback.format_exception(exc)), language=None)
