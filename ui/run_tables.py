"""Many runs at once: the runs table, and two runs' metrics and settings side by side."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import streamlit as st

from core.evaluation.headline import HEADLINE
from core.runs.labels import duration_s, knob_text, recipe_text
from core.runs.store import Run


def runs_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """One row per run for the runs table: the headline metrics after training that any of the runs reports
    (P@k and S@k on labelled corpora, STS Spearman, ordering), as the metric cards show them."""
    runs = list(runs)
    metrics = [m for m in HEADLINE if any((r.metrics_after or {}).get(m.key) is not None for r in runs)]
    rows = []
    for r in runs:
        after = r.metrics_after or {}
        rows.append({
            "run": r.id, "kind": r.kind, "status": r.status, "recipe": recipe_text(r), "margin / scale": knob_text(r),
            **{m.short.format(k="k"): None if after.get(m.key) is None else m.shown(after[m.key]) for m in metrics},
            "duration": duration_s(r), "sweep": r.sweep_id or "", "created": pd.Timestamp(r.created, unit="s", tz="UTC"),
        })
    return pd.DataFrame(rows, columns=["run", "kind", "status", "recipe", "margin / scale",
                                       *(m.short.format(k="k") for m in metrics), "duration", "sweep", "created"])


def runs_table(runs: Iterable[Run], key: str) -> None:
    metrics = {m.short.format(k="k"): st.column_config.NumberColumn(
        format=f"%.{m.digits}f{'%%' if m.percent else ''}", help=f"{m.long}, after training.") for m in HEADLINE}
    st.dataframe(runs_frame(runs), hide_index=True, key=key, column_config={
        **metrics,
        "duration": st.column_config.NumberColumn(format="%.0f s", help="Wall time from start to finish."),
        "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
    })


def _flat(config: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_diff(a: Run, b: Run) -> pd.DataFrame:
    """The settings in which two runs differ (a sweep's base settings flattened as base.<key>)."""
    fa, fb = _flat({"kind": a.kind, **a.config}), _flat({"kind": b.kind, **b.config})
    keys = [k for k in dict.fromkeys([*fa, *fb]) if fa.get(k) != fb.get(k)]
    return pd.DataFrame({"setting": keys, a.id: [_show(fa.get(k)) for k in keys],
                         b.id: [_show(fb.get(k)) for k in keys]})


def _show(value: Any) -> str:
    return "–" if value is None else str(value)


def metrics_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """Before and after headline metrics of each run side by side (percent), one row per metric."""
    columns = {}
    for run in runs:
        for when, metrics in (("before", run.before), ("after", run.metrics_after)):
            columns[f"{run.id} {when}"] = [
                None if not metrics or metrics.get(m.key) is None else m.shown(metrics[m.key]) for m in HEADLINE]
    return pd.DataFrame(columns, index=[m.short.format(k="k") for m in HEADLINE])
