"""A run's test items that changed most between its evaluations before and after training (core.evaluation.changes),
on the Runs page, with the whole list as CSV."""

from __future__ import annotations

import streamlit as st

from core.errors import UserError
from core.evaluation.changes import BETTER, WORSE, changed_items
from core.evaluation.headline import TRADE_OFF_ONLY, trade_off_only
from core.runs.export import safe_name
from core.runs.store import Run
from core.training.config import TrainConfig
from core.training.trainer import load_run_corpus
from ui.state import session_cache

SHOWN = 200  # rows drawn in the page's table; the CSV holds them all


def _changed(run: Run):
    """The run's changed items, computed once per session: a finished run's evaluations do not change, and reading
    its corpus (a large file takes seconds) and per-item arrays on every rerun would."""
    cache = session_cache("changed_items")
    if run.id not in cache:
        corpus = load_run_corpus(TrainConfig.from_dict(run.config))
        cache[run.id] = changed_items(run.before or {}, run.metrics_after or {}, corpus)
    return cache[run.id]


def changed_items_section(run: Run, key: str) -> None:
    """Which test items got worse (and better): flipped kNN predictions with their neighbours, pairs by rank-error
    growth, lists that lost their order."""
    if trade_off_only(run.metrics_after or {}):
        st.caption(f"This run was {TRADE_OFF_ONLY}, without the kNN vote whose flips this section lists; a run "
                   "trained on the Train page lists them.")
        return
    try:
        frame = _changed(run)
    except UserError as exc:
        st.caption(f"The changed items need the run's corpus, which cannot be read now: {exc}")
        return
    if frame is None:
        st.caption("This run's evaluations kept no per-item figures (it was evaluated before they were kept), so "
                   "its changed items cannot be listed; a new run lists them.")
        return
    if "predicted after" in frame:
        worse, better = int((frame["change"] == WORSE).sum()), int((frame["change"] == BETTER).sum())
        st.markdown(f"**{worse:,}** test texts went {WORSE} under the kNN vote, **{better:,}** {BETTER}: the texts "
                    "and their nearest neighbours before and after training.")
    elif "rank error after" in frame:
        st.markdown("Every scored pair by how much its **rank error** grew: where the cosine ranks the pair among "
                    "all pairs, against where its gold score does, as a share of the pairs (0 = same place).")
    else:
        lost = int((frame["change"] == "lost its order").sum())
        st.markdown(f"**{lost:,}** lists lost their exact order; then the lists that gained it, then the rest by "
                    "how much their Kendall tau fell.")
    if frame.empty:
        st.caption("No test text changed its kNN prediction.")
        return
    st.dataframe(frame.head(SHOWN), hide_index=True, key=f"{key}:table")
    if len(frame) > SHOWN:
        st.caption(f"The first {SHOWN} of {len(frame):,}; the CSV holds them all.")
    st.download_button("Download as CSV", frame.to_csv(index=False).encode("utf-8"), mime="text/csv",
                       file_name=f"{safe_name(f'changed-{run.id}')}.csv", key=f"{key}:csv",
                       icon=":material/download:")
