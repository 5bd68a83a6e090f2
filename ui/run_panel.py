"""One run on a page: status, live progress, outcome, before/after metrics and curves, and its cancel button."""

from __future__ import annotations

import time

import streamlit as st

from core.analysis.plots import loss_curve_figure
from core.evaluation.headline import HEADLINE, intervals_text
from core.evaluation.paired import change_texts
from core.evaluation.published import corpus_keys, published, shown_beside
from core.jobs.process import LOG_NAME
from core.jobs.sweep import cancel
from core.runs.export import safe_name
from core.runs.labels import duration_s, knob_text, own_settings_text, recipe_text
from core.runs.store import PARENT_KINDS, Run, RunStore
from core.training.config import checkpoint_text
from core.training.eta import fmt_seconds, phase_text, run_fraction, seconds_left
from ui.charts import plot
from ui.feedback import guard
from ui.layout import escaped
from ui.run_control import get_run
from ui.run_tables import runs_table

REFRESH_S = 1.0  # the live panel polls the database this often; the worker flushes every 0.25 s
STATUS_BADGE = {  # status -> (markdown badge colour, material icon)
    "queued": ("gray", ":material/schedule:"),
    "running": ("blue", ":material/autorenew:"),
    "done": ("green", ":material/check_circle:"),
    "failed": ("red", ":material/error:"),
    "cancelled": ("orange", ":material/cancel:"),
}


def status_line(run: Run) -> None:
    """Status badge, kind, recipe and margin, timing: what the run is at a glance."""
    colour, icon = STATUS_BADGE.get(run.status, ("gray", ":material/help:"))
    status = "cancelling" if run.active and run.cancel_requested else run.status
    parts = [f":{colour}-badge[{icon} {status}]", f"**{run.kind}** `{run.id}`"]
    if recipe_text(run):
        parts.append(f"recipe **{recipe_text(run)}**")
    if knob_text(run):
        parts.append(f"**{knob_text(run)}**")
    if own_settings_text(run):
        parts.append(f"**{escaped(own_settings_text(run))}**")
    if run.started is not None:
        parts.append(f"{'running for' if run.active else 'took'} {fmt_seconds(duration_s(run))}")
    st.markdown(" · ".join(parts))


def progress_text(run: Run) -> tuple[float, str]:
    """(fraction, text) for the run's progress bar: the phase in words ("training", "evaluating at step 40",
    "evaluating after training", "saving the model", ...), its step / total, the whole run's time left wherever the
    worker reports one (from the first training step on, core.training.eta; counted down between reports) and,
    while training, examples/s. Once there is a time left, the bar is the whole run's share done, so it does not
    fall back to 0 when the evaluation after training or saving begins."""
    p = run.progress
    phase, step, total = phase_text(run.status, p), p.get("step"), p.get("total")
    if run.status == "queued":
        return 0.0, phase
    text = phase
    fraction = 0.0
    if step is not None and total:
        fraction = min(step / total, 1.0)
        text += f": {step:,} / {total:,}" + (f" {p['unit']}" if p.get("unit") else "")
    now = time.time()
    left = seconds_left(p, now)
    if left is not None:
        text += f" · about {fmt_seconds(max(left, 1))} left"  # a second or less still reads as time left
        estimated = run_fraction(run.started, left, now) or fraction  # the whole run's, once estimated
        fraction = min(max(estimated, p.get("done_share") or 0.0), 1.0)  # and never back: the worker's share so far
    if phase == "training" and p.get("examples_per_s"):
        text += f" · {p['examples_per_s']:,.0f} examples/s"
    if run.cancel_requested:
        text = "Cancelling… " + text
    return fraction, text


def interval_caption(result: dict, when: str = "") -> None:
    """A line under a result's cards with each figure's own 95% interval (over the test items; `when`, e.g. "after
    training"), where the result holds any."""
    text = intervals_text(result, result.get("k", 16))
    if text:
        st.caption(f"95% intervals{f' {when}' if when else ''}: {text}.")


def published_caption(result: dict, corpus_fingerprints: tuple[str, ...]) -> None:
    """A line under a result's cards with the figures published for its corpus (core.evaluation.published) that it
    reports, each with its caveat where it was measured at another k or discount; nothing where there is none."""
    figures = [f for keys in corpus_fingerprints for f in published(keys).values()
               if result.get(f.key) is not None]
    if figures:
        k = result.get("k", 16)
        discount = result.get("discount", "linear")  # a result saved before the discount was a setting used linear
        st.caption("Published on this test set: " + "; ".join(escaped(shown_beside(f, k, discount)) for f in figures)
                   + ".")


def metric_cards(before: dict | None, after: dict | None, corpus_fingerprints: tuple[str, ...] = ()) -> None:
    """The headline metrics after training, with the change from before as deltas (before only, while the
    run is still training), and under them each change's paired 95% interval and p-value: is it real? The figures
    published for the run's corpus (`corpus_fingerprints`: core.evaluation.published) in a line of their own."""
    shown = after or before
    if not shown:
        return
    k = shown.get("k", 16)
    present = [metric for metric in HEADLINE if shown.get(metric.key) is not None]
    for card, metric in zip(st.columns(max(4, len(present))), present):
        value = shown[metric.key]
        base = before.get(metric.key) if after and before else None
        card.metric(metric.short.format(k=k), metric.text(value), border=True,
                    delta=None if base is None else metric.change_text(base, value),
                    help="Base model, before training." if not after else
                    None if base is None else f"Before training: {metric.text(base)}.")
    interval_caption(shown, "after training" if after else "before training")
    published_caption(shown, corpus_fingerprints)
    changes = change_texts(before, after) if after else {}
    if changes:
        st.caption("Change after − before, with its 95% interval and p-value, paired over the same test items "
                   "(bootstrap, 1,000 resamples): " + "; ".join(
                       f"{m.short.format(k=k)} {changes[m.key]}" for m in present if m.key in changes) + ".")


def corpus_fingerprints(summary: dict) -> tuple[str, ...]:
    """The fingerprints of the corpora a finished run was evaluated on (its summary's corpus, and its list corpus
    when that is another one); a run still training has no summary yet, and its corpus is only a path: none."""
    return tuple(corpus_keys(part) for name in ("corpus", "lists") if (part := summary.get(name) or {}).get(
        "fingerprint"))


def training_plot(run: Run, key: str) -> None:
    """Loss curve with the evaluation curve (history) on a second axis and the recipe's phases (a curriculum's
    bands) marked, once there is something to draw."""
    if not run.losses and not run.history:
        if run.active:
            st.caption("The loss curve appears here once the first training steps are logged.")
        return
    plot(loss_curve_figure(run.losses, run.history, run.progress.get("phases")), safe_name(f"training-{run.id}"),
         key)
    if not run.active and 0 < len(run.history) <= 2:  # before and after only
        st.caption("The scores are the evaluations before and after training, two points with no line between "
                   "them: for a curve, set Evaluate every n steps (each evaluation encodes the test texts again).")


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
        summary = run.progress.get("summary", {})
        metric_cards(run.metrics_before, run.metrics_after, corpus_fingerprints(summary))
        examples, timings = summary.get("examples", {}), summary.get("timings", {})
        bits = [f"{examples['examples']:,} examples ({examples.get('format', '?')})" if "examples" in examples else "",
                f"{summary['steps']:,} steps" if "steps" in summary else "",
                f"training {fmt_seconds(timings['train_s'])}" if "train_s" in timings else "",
                f"model: `{run.artefacts['model']}`" if "model" in run.artefacts else ""]
        st.caption(" · ".join(b for b in bits if b))
        if summary.get("selection"):  # which checkpoint the model is; step 0 is the base model itself
            kept = checkpoint_text(summary["selection"], summary.get("steps", "?"), run.config.get("sts_corpus"))
            st.caption(f"Checkpoint: {kept}.")


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
        if run.before:
            st.caption("Base model, before training:")
            metric_cards(run.before, None)
    else:
        outcome(runs, run)
    if run.kind in PARENT_KINDS:
        children = runs.list(sweep_id=run.id, with_losses=False)
        if children:
            runs_table(children, key=f"{key}:children")
        current = get_run(runs, run.progress.get("current_run")) if run.active else None
        if current is not None and current.active:
            st.markdown("**Current configuration**")
            _draw(runs, current, key=f"{key}:child")
    else:
        training_plot(run, key=f"{key}:plot:{run.id}")


def live_run(runs: RunStore, run_id: str, key: str = "live") -> None:
    """The run's status, progress, curves and cancel button, refreshed every REFRESH_S seconds in a
    fragment (the rest of the page does not rerun) while the run is active, and drawn once after."""
    first = get_run(runs, run_id)
    if first is None:
        st.info("The selected run no longer exists; start a new one or pick one on the Runs page.")
        return

    @st.fragment(run_every=REFRESH_S if first.active else None)
    def panel() -> None:
        run = get_run(runs, run_id)
        if run is None or run.status != first.status:
            st.rerun()  # it started, ended or vanished: redraw the page once (the sidebar shows its status too)
        _draw(runs, run, key)

    panel()
