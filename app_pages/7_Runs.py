"""Runs & export page: every run in a table; select, compare, cancel or delete runs; export a finished run
(model zip with its card, embeddings as Parquet, config as YAML) and download its plots."""

import pandas as pd
import streamlit as st
from pandas.io.formats.style import Styler

import ui
from core.analysis.plots import losses_figure
from core.evaluation.headline import HEADLINE
from core.runs.labels import run_label
from core.runs.store import Run
from ui import nav, run_control, run_export, run_panel, run_tables

store = ui.run_store()
reaped = store.reap_orphans()
selected = run_control.current_run(store, fallback="newest")
st.title("Runs & export")
st.caption("Every training run and sweep, as recorded by its worker process. Each is reproducible from its "
           "config: `python -m core train --config config.yaml`.")
if reaped:
    st.warning(f"{len(reaped)} run(s) whose worker process had stopped without a result were marked failed.")
flash = ui.state.session_cache("runs_page").pop("flash", None)
if flash:
    st.success(flash)

runs = store.list(with_losses=False)
if not runs:
    st.info("No runs yet: start one on the Train page.")
    nav.link(nav.TRAIN, "Go to the Train page")
    st.stop()

run_tables.runs_table(runs, key="runs:table")
ids = [r.id for r in runs]
by_id = {r.id: r for r in runs}


def metrics_table(a: Run, b: Run) -> Styler:
    """Two runs' headline metrics, each row rounded to its metric's digits (Kendall tau needs three)."""
    frame = run_tables.metrics_frame([a, b])
    styled = frame.style
    for metric, row in zip(HEADLINE, frame.index):  # metrics_frame has one row per HEADLINE metric, in order
        styled = styled.format(f"{{:.{metric.digits}f}}", na_rep="–", subset=pd.IndexSlice[[row], :])
    return styled


def _pick() -> None:
    run_control.select(st.session_state["runs:pick"])


start = ids.index(selected.id) if selected is not None and selected.id in by_id else 0
picked = st.selectbox("Selected run", ids, index=start, key="runs:pick", on_change=_pick,
                      format_func=lambda i: run_label(by_id[i]))
run = store.get(picked)

with st.container(border=True):
    run_panel.live_run(store, run.id, key="runs:live")
    export_col, delete_col = st.columns([4, 1])
    with export_col:
        if run.status == "done" and run.kind == "train":
            folder = run_export.find_export(run)
            slot = st.empty()  # the button goes once the export is there, as on every later rerun
            if folder is None and slot.button("Export", type="primary", icon=":material/ios_share:",
                                              help="Model directory with its card (zipped), embeddings of the "
                                                   "evaluation texts as Parquet and NumPy, config as YAML and JSON."):
                with ui.guard("The export"):
                    folder = run_export.export(store, run)
                    slot.empty()
            if folder is not None:
                run_export.download_buttons(folder, key=f"runs:download:{run.id}")
        elif run.kind == "train":
            st.caption("Only a finished (done) run can be exported.")
    with delete_col.popover("Delete run", icon=":material/delete:"):
        st.markdown(f"Delete run `{run.id}`, its curves and its saved model? Exports stay where they are.")
        delete = st.button("Delete permanently", type="primary", key="runs:delete")
    if delete:  # outside the popover, so a refusal stays visible
        with ui.guard("Deleting the run") as outcome:
            run_control.delete(store, run)
        if not outcome.failed:
            ui.state.session_cache("runs_page")["flash"] = f"Deleted run {run.id}."
            st.rerun()

if len(runs) >= 2:
    st.subheader("Compare two runs")
    left, right = st.columns(2)
    a_id = left.selectbox("Run A", ids, index=ids.index(run.id), key="runs:a",
                          format_func=lambda i: run_label(by_id[i]))
    b_id = right.selectbox("Run B", ids, index=1 if ids.index(run.id) == 0 else 0, key="runs:b",
                           format_func=lambda i: run_label(by_id[i]))
    if a_id == b_id:
        st.info("Pick two different runs.")
    else:
        a, b = store.get(a_id), store.get(b_id)
        metrics_col, config_col = st.columns(2)
        with metrics_col:
            st.markdown("**Metrics** (P@k, S@k and STS Spearman x100, accuracies in %, Kendall tau from -1 to 1)")
            st.dataframe(metrics_table(a, b))
        with config_col:
            diff = run_tables.config_diff(a, b)
            st.markdown(f"**Settings that differ** ({len(diff)})")
            if diff.empty:
                st.caption("The two runs have the same config.")
            else:
                st.dataframe(diff, hide_index=True)
        if a.losses or b.losses:
            ui.plot(losses_figure({a.id: a.losses, b.id: b.losses}), f"losses-{a.id}-vs-{b.id}",
                    key="runs:compare:plot")
