"""Picking the finished run(s) a comparison page shows: only done train runs of the current corpus qualify,
and the session's selected run is the default when it is one of them, so pages agree on "the run"."""

from __future__ import annotations

import streamlit as st

from core.data.corpus import Corpus
from core.runs.labels import run_labels
from core.runs.store import Run
from ui import nav, state
from ui.resources import run_store

NO_RUN = "No finished run for this corpus yet — train one on the Train page."


def no_run_message() -> None:
    """What to do next when nothing can be compared."""
    st.info(NO_RUN, icon=":material/info:")
    nav.link(nav.TRAIN, "Train a model")


def _select(key: str) -> None:
    """Make the picked run the session's run, so the other pages show it too."""
    state.set_run_id(st.session_state[key])


def _finished(corpus: Corpus) -> dict[str, Run]:
    return {run.id: run for run in run_store().finished(corpus.fingerprint)}


def _default(runs: dict[str, Run]) -> str:
    """The session's run when it is one of `runs` (finished runs of the corpus, newest first), else the newest."""
    current = state.run_id()
    return current if current in runs else next(iter(runs))


def shown_run(corpus: Corpus) -> Run | None:
    """The run the comparison pages show unless another is picked (None when there is none)."""
    runs = _finished(corpus)
    return runs[_default(runs)] if runs else None


def pick_run(corpus: Corpus, key: str) -> Run | None:
    """One finished run of this corpus (shown_run by default), or None after saying how to get one."""
    runs = _finished(corpus)
    if not runs:
        no_run_message()
        return None
    ids, labels = list(runs), run_labels(runs.values())
    picked = st.selectbox("Fine-tuned run", ids, index=ids.index(_default(runs)), format_func=labels.__getitem__,
                          key=key,
                          on_change=_select, args=(key,))
    return runs[picked]


def pick_runs(corpus: Corpus, key: str) -> list[Run]:
    """Any number of finished runs of this corpus, starting with the session's run (else the newest)."""
    runs = _finished(corpus)
    if not runs:
        no_run_message()
        return []
    labels = run_labels(runs.values())
    picked = st.multiselect("Fine-tuned runs", list(runs), default=[_default(runs)], format_func=labels.__getitem__,
                            key=key)
    return [runs[run_id] for run_id in picked]
