"""Many runs at once: the runs table, and two runs' metrics, settings and losses compared."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from pandas.io.formats.style import Styler

from core.analysis.plots import losses_figure
from core.evaluation.headline import HEADLINE, Metric, p_text
from core.evaluation.paired import compared, unlike
from core.evaluation.published import corpus_keys
from core.runs.labels import corpus_names, corpus_path, differences, duration_s, knob_text, recipe_text
from core.runs.store import Run
from core.training.config import resolved

DIFF = "A − B, after"  # the comparison's difference column: positive where run A ends higher
PAIRED = "95% CI, p (paired)"  # its interval and p-value over the same test items (core.evaluation.paired)


def runs_frame(runs: Iterable[Run], names: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per run for the runs table: its corpus (by `names`, corpus_names of all runs, else of these), tags,
    and the headline metrics after training that any of the runs reports (P@k and S@k on labelled corpora, STS
    Spearman, ordering), as the metric cards show them."""
    runs = list(runs)
    names = corpus_names(runs) if names is None else names
    differ = differences(runs)
    metrics = [m for m in HEADLINE if any((r.metrics_after or {}).get(m.key) is not None for r in runs)]
    rows = []
    for r in runs:
        after = r.metrics_after or {}
        rows.append({
            "run": r.id, "kind": r.kind, "status": r.status, "recipe": recipe_text(r), "margin / scale": knob_text(r),
            "differs in": differ.get(r.id, ""),
            "corpus": names.get(corpus_path(r) or "", ""), "tags": list(r.tags),
            **{m.short.format(k="k"): None if after.get(m.key) is None else m.shown(after[m.key]) for m in metrics},
            "duration": duration_s(r), "sweep": r.sweep_id or "",
            "created": pd.Timestamp(r.created, unit="s", tz="UTC"),
        })
    return pd.DataFrame(rows, columns=["run", "kind", "status", "recipe", "margin / scale", "differs in", "corpus",
                                       "tags",
                                       *(m.short.format(k="k") for m in metrics), "duration", "sweep", "created"])


def runs_table(runs: Iterable[Run], key: str, names: dict[str, str] | None = None) -> None:
    metrics = {m.short.format(k="k"): st.column_config.NumberColumn(
        format=f"%.{m.digits}f{'%%' if m.percent else ''}", help=f"{m.long}, after training.") for m in HEADLINE}
    st.dataframe(runs_frame(runs, names), hide_index=True, key=key, placeholder="–", column_config={
        **metrics,
        "tags": st.column_config.ListColumn(help="Set below, for the selected run."),
        "differs in": st.column_config.TextColumn(help="The settings in which the run differs from the other runs "
                                                       "of its recipe shown here, beyond its margin / scale."),
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


def _settings(run: Run) -> dict:
    """A run's settings as it trained (core.training.config.resolved), flat: a sweep's base as base.<key>."""
    if run.kind == "sweep":
        return _flat({"kind": run.kind, **run.config, "base": resolved(run.config.get("base", {}))})
    return _flat({"kind": run.kind, **resolved(run.config)})


def corpus_of(run: Run) -> str | None:
    """What a finished run's corpus held, as its summary recorded it (the rows as a set, else the fingerprint); None
    for a run without one (unfinished, or saved before)."""
    keys = corpus_keys(((run.progress or {}).get("summary") or {}).get("corpus") or {})
    return next((key for key in keys if key), None)


def same_corpus(a: Run, b: Run) -> bool | None:
    """Whether two runs read one corpus, by its content (an upload's copy and the original file are one); None where
    a run did not record it."""
    ka, kb = corpus_of(a), corpus_of(b)
    return None if ka is None or kb is None else ka == kb


def config_diff(a: Run, b: Run) -> pd.DataFrame:
    """The settings in which runs A and B differ, with defaults filled in and the reference resolved, so a run saved
    without them (a quick run, an older run) differs only where it trained differently. The corpus is compared by its
    content and shown by its name (corpus_names): one corpus read from the app's copy and from the original file is
    no difference, and it is never shown as the copy's path."""
    fa, fb = _settings(a), _settings(b)
    names = corpus_names([a, b])
    for run, flat in ((a, fa), (b, fb)):
        if (path := corpus_path(run)) is not None:
            flat["corpus"] = names.get(path, path)
    keys = [k for k in dict.fromkeys([*fa, *fb]) if fa.get(k) != fb.get(k)
            and not (k == "corpus" and same_corpus(a, b))]
    return pd.DataFrame({"setting": keys, "A": [_show(fa.get(k)) for k in keys], "B": [_show(fb.get(k)) for k in keys]})


def _show(value: Any) -> str:
    return "–" if value is None else str(value)


def metrics_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """Before and after headline metrics of runs named A, B, … by position (run ids are too long for column
    headers), as shown (P@k x100, accuracies in %); one row per metric that any of them reports."""
    columns = {}
    for name, run in zip("ABCDEFGH", runs):
        for when, metrics in (("before", run.before), ("after", run.metrics_after)):
            columns[f"{name} {when}"] = [
                None if not metrics or metrics.get(m.key) is None else m.shown(metrics[m.key]) for m in HEADLINE]
    frame = pd.DataFrame(columns, index=[m.short.format(k="k") for m in HEADLINE], dtype=float)
    return frame[frame.notna().any(axis=1)]


def comparison(a: Run, b: Run) -> tuple[pd.DataFrame, list[str]]:
    """Runs A and B before and after, A's result minus B's (in points: percentage points for accuracies) where the
    two are one figure computed alike (core.evaluation.paired.unlike, which the CLI's compare asks too), that
    difference's paired 95% interval and p-value where both runs scored the same test items; and the notes saying
    why a figure is not compared."""
    frame = metrics_frame([a, b])
    both = a.metrics_after and b.metrics_after
    result = compared(b.metrics_after, a.metrics_after) if both else {"metrics": [], "notes": []}  # A - B
    like = [both and unlike(_metric(row).key, b.metrics_after, a.metrics_after) is None for row in frame.index]
    frame[DIFF] = (frame["A after"] - frame["B after"]).where(like)
    paired = {d["name"]: d for d in result["metrics"]}
    frame[PAIRED] = [_paired_text(_metric(row), paired.get(_metric(row).key)) for row in frame.index]
    return frame, result["notes"]


def comparison_frame(a: Run, b: Run) -> pd.DataFrame:
    """comparison's table alone."""
    return comparison(a, b)[0]


def _paired_text(metric: Metric, difference: dict | None) -> str:
    """A paired difference's interval and p-value (its value has its own column); '–' where it has none."""
    if difference is None:
        return "–"
    if difference["p_value"] is None and difference["ci_low"] is None:
        return "too few items to judge"
    return f"{metric.interval_text(difference['ci_low'], difference['ci_high'])}, {p_text(difference['p_value'])}"


def _metric(row: str) -> Metric:
    return next(m for m in HEADLINE if m.short.format(k="k") == row)


def comparison_table(frame: pd.DataFrame) -> Styler:
    """A comparison's table styled for st.table: each row at its metric's digits, accuracies with '%' and their
    differences in 'pp' (a change of an accuracy is in percentage points, not a percentage), '–' where missing."""
    styled = frame.style
    values = [c for c in frame.columns if c not in (DIFF, PAIRED)]
    for row in frame.index:
        metric = _metric(row)
        unit = "%" if metric.percent else ""
        styled = styled.format(f"{{:.{metric.digits}f}}{unit}", na_rep="–", subset=pd.IndexSlice[[row], values])
        styled = styled.format(f"{{:+.{metric.digits}f}}{' pp' if metric.percent else ''}", na_rep="–",
                               subset=pd.IndexSlice[[row], [DIFF]])
    return styled


def losses_comparison(a: Run, b: Run, log: bool) -> tuple[go.Figure, int]:
    """Runs A's and B's training losses on one plot, on a log axis if `log`; with the number of points a log axis
    cannot draw (a loss of zero, as a triplet loss reaches once every margin holds, or below)."""
    fig = losses_figure({f"A · {a.id}": a.losses, f"B · {b.id}": b.losses})
    if not log:
        return fig, 0
    fig.update_yaxes(type="log", title_text="loss (log scale)")
    return fig, sum(1 for p in [*a.losses, *b.losses] if p["loss"] is not None and p["loss"] <= 0)
