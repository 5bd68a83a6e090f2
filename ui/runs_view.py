"""Runs in the pages: which run is selected, starting one, its live progress, outcome and metrics, the
runs table, comparison, deletion and export. Shared by the Train and Runs pages and any later page that
shows or starts runs; core.runs.store / core.jobs.worker / core.runs.export do the work, this module draws it.

The selected run lives in the session (ui.state) and in the URL (`?run=<id>`), so a reload or a second
tab opened on the same URL shows the same run; the worker process, not the tab, owns the run itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.analysis.plots import loss_curve_figure
from core.errors import UserError
from core.jobs import launch, standby
from core.jobs.process import LOG_NAME
from core.jobs.sweep import cancel
from core.runs.export import export_name, export_run, safe_name
from core.runs.labels import duration_s, knob_text, recipe_text
from core.runs.store import Run, RunStore
from core.storage import exports_dir, home
from ui import state
from ui.feedback import guard, progress_bar

QUERY_KEY = "run"
REFRESH_S = 1.0  # the live panel polls the database this often; the worker flushes every 0.25 s
STATUS_BADGE = {  # status -> (markdown badge colour, material icon)
    "queued": ("gray", ":material/schedule:"),
    "running": ("blue", ":material/autorenew:"),
    "done": ("green", ":material/check_circle:"),
    "failed": ("red", ":material/error:"),
    "cancelled": ("orange", ":material/cancel:"),
}
METRICS = (  # key in an evaluation result, card label ({k} filled in), factor to percent
    ("polarity", "P@{k}", 1.0),
    ("similarity", "S@{k}", 1.0),
    ("knn_accuracy", "kNN accuracy", 100.0),
    ("linear_accuracy", "Linear probe", 100.0),
)
EXPORT_FILES = (  # file in an export folder, download label, MIME type
    ("model.zip", "Model (zip)", "application/zip"),
    ("embeddings.parquet", "Embeddings (Parquet)", "application/octet-stream"),
    ("config.yaml", "Config (YAML)", "application/x-yaml"),
)


# ---------------------------------------------------------------- store, selection, starting


@st.cache_resource(show_spinner=False)
def _store(root: str) -> RunStore:
    return RunStore(root)


def store() -> RunStore:
    """The run store under CONTRASTLAB_HOME, opened once per server process (per home, for tests)."""
    return _store(str(home()))


def select(run_id: str | None) -> None:
    """Make a run the selected one in the session and in the URL."""
    state.set_run_id(run_id)
    if run_id:
        st.query_params[QUERY_KEY] = run_id
    elif QUERY_KEY in st.query_params:
        del st.query_params[QUERY_KEY]


def _get(runs: RunStore, run_id: str | None) -> Run | None:
    if not run_id:
        return None
    try:
        return runs.get(run_id)
    except UserError:  # deleted meanwhile, or a hand-edited URL
        return None


def current_run(runs: RunStore, fallback: Literal["active", "newest"] = "active") -> Run | None:
    """The run named in the URL, else the session's, else the newest active (or newest) run.

    Keeps URL and session in step; when that changes the selection the script reruns once, so the
    sidebar (drawn before this) names the run too.
    """
    shown = state.run_id()
    run = _get(runs, st.query_params.get(QUERY_KEY)) or _get(runs, shown)
    if run is None:
        listed = runs.list(with_losses=False)
        pick = next((r for r in listed if r.active), None) if fallback == "active" else next(iter(listed), None)
        run = _get(runs, pick.id) if pick else None
    run_id = run.id if run else None
    if st.query_params.get(QUERY_KEY) != run_id or shown != run_id:
        select(run_id)
        if shown != run_id:
            st.rerun()
    return run


def corpus_fields() -> dict:
    """TrainConfig's corpus fields for the session's corpus: the demo file itself, else the table saved
    as Parquet (core.data.corpus.persist_table) so the worker process reads exactly these rows."""
    from core.data.corpus import demo_corpus_path, persist_table

    corpus, table = state.corpus(), state.table()
    if corpus is None or table is None:
        raise UserError("No corpus is loaded yet; load one on the Corpus page first.")
    columns, dropped = corpus.columns, corpus.report.duplicates_dropped > 0
    if table.source == "demo" and not dropped:
        path = demo_corpus_path()
    else:
        path = persist_table(table.df, columns, drop_duplicates=dropped)
    return {"corpus": str(path), "text_col": columns.text, "label_col": columns.label, "split_col": columns.split}


def keep_warm() -> None:
    """Keep a pre-warmed worker waiting (core.jobs.standby) on pages that start runs, so a run starts training
    without first spending seconds on imports."""
    standby.ensure(store())


def start_run(kind: str, config: dict) -> str:
    """Create a run, hand it to a detached worker process and select it; returns its id."""
    runs = store()
    run_id = runs.create(kind, config)
    try:
        launch.start(runs, run_id)
    except Exception as exc:
        runs.mark_failed(run_id, f"The worker process could not be started ({type(exc).__name__}: {exc}).")
        raise
    select(run_id)
    return run_id


# ---------------------------------------------------------------- one run


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def status_line(run: Run) -> None:
    """Status badge, kind, recipe and margin, timing: what the run is at a glance."""
    colour, icon = STATUS_BADGE.get(run.status, ("gray", ":material/help:"))
    status = "cancelling" if run.active and run.cancel_requested else run.status
    parts = [f":{colour}-badge[{icon} {status}]", f"**{run.kind}** `{run.id}`"]
    if recipe_text(run):
        parts.append(f"recipe **{recipe_text(run)}**")
    if knob_text(run):
        parts.append(f"**{knob_text(run)}**")
    if run.started is not None:
        parts.append(f"{'running for' if run.active else 'took'} {fmt_seconds(duration_s(run))}")
    st.markdown(" · ".join(parts))


def progress_text(run: Run) -> tuple[float, str]:
    """(fraction, text) for the run's progress bar: phase, step / total, ETA and examples/s."""
    p = run.progress
    if run.status == "queued":
        return 0.0, "Waiting for the worker process to start…"
    phase, step, total = p.get("phase") or "starting", p.get("step"), p.get("total")
    text = phase
    fraction = 0.0
    if step is not None and total:
        fraction = min(step / total, 1.0)
        text += f": {step:,} / {total:,}"
    if phase == "training":
        if p.get("eta_s") is not None:
            text += f" · about {fmt_seconds(p['eta_s'])} left"
        if p.get("examples_per_s"):
            text += f" · {p['examples_per_s']:,.0f} examples/s"
    if run.cancel_requested:
        text = "Cancelling… " + text
    return fraction, text


def metric_cards(before: dict | None, after: dict | None) -> None:
    """P@k, S@k, kNN and linear-probe accuracy after training, with the change from before as deltas
    (before only, while the run is still training)."""
    shown = after or before
    if not shown:
        return
    k = shown.get("k", 16)
    cards = st.columns(len(METRICS))
    for card, (key, label, factor) in zip(cards, METRICS):
        if shown.get(key) is None:
            continue
        value = shown[key] * factor
        unit = "%" if factor != 1.0 else ""
        base = before.get(key) if after and before else None
        card.metric(label.format(k=k), f"{value:.1f}{unit}", border=True,
                    delta=None if base is None else f"{value - base * factor:+.1f}{unit}",
                    help="Base model, before training." if not after else
                    None if base is None else f"Before training: {base * factor:.1f}{unit}.")


def plot(fig: go.Figure, name: str, key: str) -> None:
    """A Plotly chart with a button that downloads it as a self-contained interactive HTML file
    (the chart's own toolbar offers PNG)."""
    st.plotly_chart(fig, key=key)
    st.download_button("Download as HTML", data=lambda: fig.to_html(include_plotlyjs=True), file_name=f"{name}.html",
                       mime="text/html", key=f"{key}:html", on_click="ignore", icon=":material/download:",
                       type="tertiary")


def training_plot(run: Run, key: str) -> None:
    """Loss curve with the evaluation curve (history) on a second axis, once there is something to draw."""
    if not run.losses and not run.history:
        if run.active:
            st.caption("The loss curve appears here once the first training steps are logged.")
        return
    plot(loss_curve_figure(run.losses, run.history), safe_name(f"training-{run.id}"), key)


def outcome(runs: RunStore, run: Run) -> None:
    """How a finished run ended: metrics for done, the error line and log for failed, a note for cancelled."""
    if run.status == "failed":
        st.error(f"The run failed: {run.error or 'no error was recorded'}")
        st.caption(f"Full log: `{runs.run_dir(run.id) / LOG_NAME}`")
    elif run.status == "cancelled":
        step, total = run.progress.get("step"), run.progress.get("total")
        at = f" at step {step:,} of {total:,}" if step is not None and total else ""
        st.warning(f"The run was cancelled{at}; no model was saved.", icon=":material/cancel:")
    elif run.status == "done" and run.kind == "train":
        metric_cards(run.metrics_before, run.metrics_after)
        summary = run.progress.get("summary", {})
        examples, timings = summary.get("examples", {}), summary.get("timings", {})
        bits = [f"{examples['examples']:,} {examples.get('format', '')} examples" if "examples" in examples else "",
                f"{summary['steps']:,} steps" if "steps" in summary else "",
                f"training {fmt_seconds(timings['train_s'])}" if "train_s" in timings else "",
                f"model: `{run.artefacts['model']}`" if "model" in run.artefacts else ""]
        st.caption(" · ".join(b for b in bits if b))


def cancel_button(runs: RunStore, run: Run, key: str) -> None:
    """Ask an active run (and a sweep's children) to stop; the worker ends it as cancelled."""
    if st.button("Cancel run", key=key, icon=":material/stop_circle:", disabled=run.cancel_requested,
                 help="Stops after the current training step; nothing is saved."):
        with guard("Cancelling the run"):
            cancel(runs, run.id)


def _draw(runs: RunStore, run: Run, key: str) -> None:
    status_line(run)
    if run.active:
        fraction, text = progress_text(run)
        st.progress(fraction, text=text)
        cancel_button(runs, run, key=f"{key}:cancel:{run.id}")
        if run.progress.get("metrics_before"):
            st.caption("Base model, before training:")
            metric_cards(run.progress["metrics_before"], None)
    else:
        outcome(runs, run)
    if run.kind == "sweep":
        children = runs.list(sweep_id=run.id, with_losses=False)
        if children:
            runs_table(children, key=f"{key}:children")
        current = _get(runs, run.progress.get("current_run")) if run.active else None
        if current is not None and current.active:
            st.markdown("**Current configuration**")
            _draw(runs, current, key=f"{key}:child")
    else:
        training_plot(run, key=f"{key}:plot:{run.id}")


def live_run(runs: RunStore, run_id: str, key: str = "live") -> None:
    """The run's status, progress, curves and cancel button, refreshed every REFRESH_S seconds in a
    fragment (the rest of the page does not rerun) while the run is active, and drawn once after."""
    first = _get(runs, run_id)
    if first is None:
        st.info("The selected run no longer exists; start a new one or pick one on the Runs page.")
        return

    @st.fragment(run_every=REFRESH_S if first.active else None)
    def panel() -> None:
        run = _get(runs, run_id)
        if run is None or run.active != first.active:
            st.rerun()  # it ended (or vanished): redraw the page once, without the timer
        _draw(runs, run, key)

    panel()


# ---------------------------------------------------------------- many runs


def runs_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """One row per run for the runs table (after-training metrics; the run's config holds the rest)."""
    rows = []
    for r in runs:
        after = r.metrics_after or {}
        knn = after.get("knn_accuracy")
        rows.append({
            "run": r.id, "kind": r.kind, "status": r.status, "recipe": recipe_text(r), "margin": knob_text(r),
            "P@k": after.get("polarity"), "S@k": after.get("similarity"),
            "kNN after": None if knn is None else 100 * knn, "duration": duration_s(r),
            "sweep": r.sweep_id or "", "created": pd.Timestamp(r.created, unit="s", tz="UTC"),
        })
    return pd.DataFrame(rows, columns=["run", "kind", "status", "recipe", "margin", "P@k", "S@k", "kNN after",
                                       "duration", "sweep", "created"])


def runs_table(runs: Iterable[Run], key: str) -> None:
    st.dataframe(runs_frame(runs), hide_index=True, key=key, column_config={
        "P@k": st.column_config.NumberColumn(format="%.1f", help="Polarity after training (x100)."),
        "S@k": st.column_config.NumberColumn(format="%.1f", help="Semantic similarity after training (x100)."),
        "kNN after": st.column_config.NumberColumn(format="%.1f%%", help="kNN accuracy after training."),
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


def _show(value) -> str:
    return "–" if value is None else str(value)


def metrics_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """Before and after metrics of each run side by side (percent), one row per metric."""
    columns = {}
    for run in runs:
        for when, metrics in (("before", run.metrics_before), ("after", run.metrics_after)):
            columns[f"{run.id} {when}"] = [None if not metrics or metrics.get(key) is None else metrics[key] * factor
                                           for key, _label, factor in METRICS]
    index = [label.format(k="k") for _key, label, _factor in METRICS]
    return pd.DataFrame(columns, index=index)


def losses_figure(runs: Iterable[Run]) -> go.Figure:
    """Training losses of several runs on one plot."""
    fig = go.Figure()
    for run in runs:
        fig.add_trace(go.Scatter(x=[p["step"] for p in run.losses], y=[p["loss"] for p in run.losses],
                                 mode="lines", name=run.id))
    fig.update_layout(title="Training loss", hovermode="x unified", legend_title_text="run")
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="loss")
    return fig


def delete(runs: RunStore, run: Run) -> None:
    """Delete a finished run; an active one is refused, whatever its process state."""
    if run.active:
        raise UserError(f"Run {run.id} is still {run.status}; cancel it and wait until it has stopped, then delete it.")
    runs.delete(run.id)
    if state.run_id() == run.id:
        select(None)


# ---------------------------------------------------------------- export


def find_export(run: Run) -> Path | None:
    """The run's complete export folder, if it was exported before (export_run renames it into place last)."""
    folder = exports_dir() / export_name(run)
    return folder if (folder / "model.zip").exists() else None


def export(runs: RunStore, run: Run) -> Path:
    """Export a done run into CONTRASTLAB_HOME/exports with a progress bar, or reuse an earlier export."""
    found = find_export(run)
    if found is not None:
        return found
    with progress_bar("Exporting…") as bar:
        result = export_run(runs, run.id, exports_dir(), progress=lambda d, t: bar("Encoding embeddings", d, t))
    return Path(result["dir"])


def _reader(path: Path) -> Callable[[], bytes]:
    return lambda: path.read_bytes()


def download_buttons(folder: Path, key: str) -> None:
    """Download buttons for the model zip, the embeddings and the config of an export folder; files are
    read only when clicked (a model zip is large)."""
    present = [(name, label, mime) for name, label, mime in EXPORT_FILES if (folder / name).exists()]
    for col, (name, label, mime) in zip(st.columns(max(len(present), 1)), present):
        col.download_button(label, data=_reader(folder / name), file_name=f"{folder.name}-{name}", mime=mime,
                            key=f"{key}:{name}", on_click="ignore", icon=":material/download:")
    st.caption(f"Exported to `{folder}`")
