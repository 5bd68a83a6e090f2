"""Which run the session works on, and starting or deleting runs; core.runs.store / core.jobs do the work.

The selected run lives in the session (ui.state) and in the URL (`?run=<id>`), so a reload or a second
tab opened on the same URL shows the same run; the worker process, not the tab, owns the run itself.
"""

from __future__ import annotations

from typing import Literal

import streamlit as st

from core.data.content import persist_table
from core.data.corpus import demo_corpus_path
from core.data.kinds import column_settings, kind_of
from core.errors import UserError
from core.jobs import launch, standby
from core.runs.store import Run, RunStore
from ui import state
from ui.resources import run_store

QUERY_KEY = "run"


def select(run_id: str | None) -> None:
    """Make a run the selected one in the session and in the URL."""
    state.set_run_id(run_id)
    if run_id:
        st.query_params[QUERY_KEY] = run_id
    elif QUERY_KEY in st.query_params:
        del st.query_params[QUERY_KEY]


def get_run(runs: RunStore, run_id: str | None) -> Run | None:
    """The run, or None when there is no id or it is gone (deleted meanwhile, or a hand-edited URL). Read through
    launch.poll, so a run whose worker died shows as failed instead of running forever."""
    if not run_id:
        return None
    try:
        return launch.poll(runs, run_id)
    except UserError:
        return None


def current_run(runs: RunStore, fallback: Literal["active", "newest"] = "active") -> Run | None:
    """The run named in the URL, else the session's, else the newest active (or newest) run.

    Keeps URL and session in step; when that changes the selection the script reruns once, so the
    sidebar (drawn before this) names the run too.
    """
    shown = state.run_id()
    run = get_run(runs, st.query_params.get(QUERY_KEY)) or get_run(runs, shown)
    if run is None:
        listed = runs.list(with_losses=False)
        pick = next((r for r in listed if r.active), None) if fallback == "active" else next(iter(listed), None)
        run = get_run(runs, pick.id) if pick else None
    run_id = run.id if run else None
    if st.query_params.get(QUERY_KEY) != run_id or shown != run_id:
        select(run_id)
        if shown != run_id:
            st.rerun()
    return run


def corpus_fields() -> dict:
    """TrainConfig's corpus fields for the session's corpus: the demo file itself, else the mapped columns saved
    under their own names as Parquet (core.data.content.persist_table) so the worker process reads exactly these
    rows, with the column settings that read the same columns from the original file on any machine."""
    corpus, table = state.corpus(), state.table()
    if corpus is None or table is None:
        raise UserError("No corpus is loaded yet; load one on the Corpus page first.")
    columns = column_settings(corpus)
    path = demo_corpus_path() if table.source == "demo" else persist_table(table.df, columns.values())
    options = kind_of(corpus).options  # a labelled corpus's duplicates, a list corpus's shape
    dropped = "drop_duplicates" in options and corpus.report.duplicates_dropped > 0
    return {"corpus": str(path), **columns, "drop_duplicates": dropped, "drop_leaked": corpus.report.leaked_dropped > 0,
            **({"list_shape": corpus.shape} if "list_shape" in options else {})}


def corpus_name() -> str | None:
    """The session's corpus as the user named it, which its runs record: an upload's file name, else the table's."""
    table = state.table()
    return (table.file or table.name) if table is not None else None


def keep_warm() -> None:
    """Keep a pre-warmed worker waiting (core.jobs.standby) on pages that start runs, so a run starts training
    without first spending seconds on imports."""
    standby.ensure(run_store())


def start_run(kind: str, config: dict) -> str:
    """Create a run, hand it to a detached worker process and select it; returns its id."""
    runs = run_store()
    run_id = runs.create(kind, config, corpus_name=corpus_name())
    try:
        launch.start(runs, run_id)
    except Exception as exc:
        runs.mark_failed(run_id, f"The worker process could not be started ({type(exc).__name__}: {exc}).")
        raise
    select(run_id)
    return run_id


def delete(runs: RunStore, run: Run) -> None:
    """Delete a finished run; an active one is refused, whatever its process state."""
    if run.active:
        raise UserError(f"Run {run.id} is still {run.status}; cancel it and wait until it has stopped, then delete it.")
    runs.delete(run.id)
    if state.run_id() == run.id:
        select(None)
