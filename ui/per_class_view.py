"""Per-class results on a page: the per-class table and the kNN confusion matrices of an evaluation, or of a run
before and after training (the figures come from core.evaluation.per_class)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.analysis.per_class_plots import confusion_figure
from core.evaluation.headline import TRADE_OFF_ONLY, trade_off_only
from core.evaluation.paired import FEW_ITEMS, MIN_ITEMS
from core.evaluation.per_class import MAX_CONFUSION_CLASSES, SMALL_CLASS, confusion_counts, per_class_frame
from core.runs.export import safe_name
from ui.charts import plot
from ui.layout import escaped


def _columns(frame: pd.DataFrame) -> dict:
    """Number formats by column role: P@k in points, recall in %, changes signed (recall in percentage points)."""
    config: dict = {"class": st.column_config.TextColumn("class"),
                    "n": st.column_config.NumberColumn("n test texts", format="%d",
                                                       help="Targets of this class: what its figures average over."),
                    "few": st.column_config.CheckboxColumn(f"< {SMALL_CLASS} texts",
                                                           help="Few test texts: one text moves the class's kNN "
                                                                "recall by more than 5 points.")}
    for column in frame.columns:
        change = column.endswith("change")
        if column.startswith("P@"):
            config[column] = st.column_config.NumberColumn(format="%+.1f" if change else "%.1f")
        elif column.startswith("kNN recall"):
            config[column] = st.column_config.NumberColumn(format="%+.1f pp" if change else "%.1f%%")
    return config


def _few_note(frame: pd.DataFrame) -> None:
    """Name the small classes above the table: their figures move in big steps, which a headline hides."""
    few = frame[frame["few"] & (frame["n"] > 0)].sort_values("n")
    if few.empty:
        return
    listed = ", ".join(f"{escaped(c)} ({n})" for c, n in zip(few["class"], few["n"]))
    smallest, n = few.iloc[0]["class"], int(few.iloc[0]["n"])
    st.warning(f"Few test texts: {listed}. Their figures rest on fewer than {SMALL_CLASS} texts each; in "
               f"{escaped(smallest)} one text is {100 / n:.0f} points of kNN recall, so read them with care.",
               icon=":material/warning:")


def per_class_results(before: dict | None, after: dict | None, key: str, name: str) -> None:
    """Per-class table and kNN confusion matrices. `before`, `after`: evaluation results (`evaluate`'s dict, as
    stored as a run's metrics before and after training); `after` None shows one evaluation (the Corpus page's
    reference). `name` names the downloaded files; `key` keeps widget keys apart."""
    frame = per_class_frame(before, after)
    if frame.empty and trade_off_only(after or before or {}):
        st.caption(f"No per-class results: this run was {TRADE_OFF_ONLY}; the per-class table reads the kNN vote, "
                   "which a run trained on the Train page has.")
        return
    if frame.empty:
        st.caption("No per-class results: they come with an evaluation on a labelled corpus, and one recorded before "
                   "ContrastLab kept them has none (evaluate or train again to see them).")
        return
    data = next(result["per_class"] for result in (after, before) if result and result.get("per_class"))
    st.caption(f"Per class: **P@{data['k']}** is the mean over the class's test texts (x100, with its sd); "
               f"**kNN recall** is the share of them the kNN classifier (k = {data['knn_k']}) labels correctly. "
               "The headline figures average over all texts, so a small class barely moves them. Each change's "
               "95% interval and p-value are paired over the class's own test texts (bootstrap, 1,000 resamples): "
               f"none for a class of fewer than {MIN_ITEMS}, marked rough below {FEW_ITEMS}.")
    _few_note(frame)
    st.dataframe(frame, hide_index=True, key=f"{key}:table", placeholder="–", column_config=_columns(frame))
    results = [("before", before), ("after", after)] if after is not None else [("", before)]
    panels = [(when, matrix) for when, result in results if (matrix := confusion_counts(result)) is not None]
    if not panels:
        st.caption(f"The confusion matrix is drawn for up to {MAX_CONFUSION_CLASSES} classes; this corpus has "
                   f"{len(frame)}.")
        return
    for column, (when, (classes, counts)) in zip(st.columns(len(panels)), panels):
        title = f"kNN confusion matrix{f', {when} training' if when else ''}"
        with column:
            plot(confusion_figure(classes, counts, title), safe_name(f"confusion-{name}{f'-{when}' if when else ''}"),
                 key=f"{key}:confusion:{when or 'one'}")
