"""Runs & export page: every run in a table, narrowed by recipe, corpus and tag; select, annotate (note, tags),
compare, cancel or delete runs; export a finished run (model zip with its card, embeddings as Parquet and as the
TensorBoard projector's TSV pair, config as YAML) and download its plots."""

import streamlit as st

import ui
from core.evaluation.headline import TRADE_OFF_ONLY, trade_off_only
from core.runs.labels import corpus_names, recipe_text, recipes_of, run_labels, select_runs
from core.runs.store import NOTE_MAX, TAG_MAX, TAGS_MAX
from ui import nav, run_control, run_export, run_panel, run_tables
from ui.changes_view import changed_items_section
from ui.layout import escaped
from ui.per_class_view import per_class_results

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

all_runs = store.list(with_losses=False)
if not all_runs:
    st.info("No runs yet: start one on the Train page.")
    nav.link(nav.TRAIN, "Go to the Train page")
    st.stop()

names = corpus_names(all_runs)
recipe_col, corpus_col, tag_col = st.columns(3)
recipes = recipe_col.multiselect("Recipe", sorted({r for run in all_runs for r in recipes_of(run) if r}),
                                 key="runs:filter:recipe", placeholder="All recipes")
corpora = corpus_col.multiselect("Corpus", sorted(names, key=lambda p: names[p].casefold()), key="runs:filter:corpus",
                                 format_func=names.get, placeholder="All corpora")
tags = tag_col.multiselect("Tag", sorted({t for run in all_runs for t in run.tags}, key=str.casefold),
                           key="runs:filter:tag", placeholder="All tags", help="Runs with any of the picked tags.")
runs = select_runs(all_runs, recipes, corpora, tags)
if not runs:
    st.info("No run matches these filters; clear one to see more.")
    st.stop()
if len(runs) < len(all_runs):
    st.caption(f"Showing {len(runs)} of {len(all_runs)} runs.")

run_tables.runs_table(runs, key="runs:table", names=names)
ids = [r.id for r in runs]
by_id = {r.id: r for r in runs}
labels = run_labels(runs)  # each run named by every setting in which it differs from the others shown


def _pick() -> None:
    run_control.select(st.session_state["runs:pick"])


start = ids.index(selected.id) if selected is not None and selected.id in by_id else 0
picked = st.selectbox("Selected run", ids, index=start, key="runs:pick", on_change=_pick,
                      format_func=labels.__getitem__)
run = store.get(picked)

with st.container(border=True):
    run_panel.live_run(store, run.id, key="runs:live")
    if run.status == "done" and run.kind == "train" and "polarity" in (run.metrics_after or {}):
        st.markdown("**Per class**")
        per_class_results(run.before, run.metrics_after, key=f"runs:per_class:{run.id}", name=run.id)
    if run.status == "done" and run.kind == "train":
        with st.expander("What got worse (and better)", icon=":material/compare_arrows:"):
            changed_items_section(run, key=f"runs:changes:{run.id}")
    with st.expander("Note and tags", icon=":material/sell:", expanded=bool(run.note or run.tags)):
        saves = ui.state.session_cache("runs_page").setdefault("saves", {})  # a save makes new widgets: stored text
        note_key, tags_key = (f"runs:{field}:{run.id}:{saves.get(run.id, 0)}" for field in ("note", "tags"))
        with st.form(f"runs:annotate:{run.id}:{saves.get(run.id, 0)}", border=False):
            note = st.text_area("Note", value=run.note, key=note_key, placeholder="What this run tried, what it showed",
                                help=f"Free text, at most {NOTE_MAX:,} characters.")
            tag_text = st.text_input("Tags", value=", ".join(run.tags), key=tags_key, placeholder="baseline, sst2",
                                     help=f"Separated by commas, at most {TAGS_MAX} of up to {TAG_MAX} characters "
                                          "each; repeats are kept once. Filter the runs by them above.")
            save = st.form_submit_button("Save note and tags", icon=":material/save:")
        if save:
            with ui.guard("Saving the note and tags") as outcome:
                store.annotate(run.id, note=note, tags=tag_text)
            if not outcome.failed:
                saves[run.id] = saves.get(run.id, 0) + 1
                ui.state.session_cache("runs_page")["flash"] = f"Saved the note and tags of run {run.id}."
                st.rerun()
    export_col, delete_col = st.columns([4, 1])
    with export_col:
        if run.status == "done" and run.kind == "train":
            folder = run_export.find_export(run)
            slot = st.empty()  # the button goes once the export is there, as on every later rerun
            if folder is None and slot.button("Export", type="primary", icon=":material/ios_share:",
                                              help="Model directory with its card (zipped), embeddings of the "
                                                   "evaluation texts as Parquet and NumPy and as the TSV pair the "
                                                   "TensorBoard embedding projector loads, config as YAML and JSON."):
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
    a_id = left.selectbox("Run A", ids, index=ids.index(run.id), key="runs:a", format_func=labels.__getitem__)
    b_id = right.selectbox("Run B", ids, index=1 if ids.index(run.id) == 0 else 0, key="runs:b",
                           format_func=labels.__getitem__)
    if a_id == b_id:
        st.info("Pick two different runs.")
    else:
        a, b = store.get(a_id), store.get(b_id)
        st.markdown(f"**Metrics** of **A** `{labels[a.id]}` and **B** `{labels[b.id]}`")
        frame, notes = run_tables.comparison(a, b)
        st.table(run_tables.comparison_table(frame))
        if run_tables.same_corpus(a, b) is False:  # a figure only one of them reports is a row with a dash
            names = corpus_names([a, b])
            name_a, name_b = (escaped(names.get(run.config.get("corpus"), "?")) for run in (a, b))
            st.caption(f"A and B were evaluated on different corpora ({name_a} and {name_b}): a figure only one of "
                       "them reports is a dash for the other, and no difference is taken between the two.")
        for note in notes:  # the figures not subtracted, and why: as `python -m core compare` says it
            st.caption(f"Note: {escaped(note)}")
        for side, scored in (("A", a), ("B", b)):
            if trade_off_only(scored.metrics_after or {}):
                st.caption(f"{side} was {TRADE_OFF_ONLY}: its kNN and linear-probe rows are empty, not lost.")
        st.caption("P@k, S@k and STS Spearman x100, accuracies in %, Kendall tau from -1 to 1. \"A − B\" is A's "
                   "result minus B's, for accuracies in percentage points (pp); beside it, that difference's 95% "
                   "interval and two-sided p-value, paired over the test items both runs scored (bootstrap, 1,000 "
                   "resamples; docs/definitions.md). An interval that holds 0 (p ≥ 0.05) is not a difference this "
                   "test set can show.")
        diff = run_tables.config_diff(a, b)
        st.markdown(f"**Settings that differ** ({len(diff)})")
        if diff.empty:
            st.caption("The two runs have the same config.")
        else:
            st.dataframe(diff, hide_index=True)
        if a.losses or b.losses:
            log = st.toggle("Log scale", key="runs:compare:log",
                            help="Loss on a logarithmic axis: late, small changes stay visible.")
            figure, hidden = run_tables.losses_comparison(a, b, log)
            ui.plot(figure, f"losses-{a.id}-vs-{b.id}", key="runs:compare:plot")
            if a.config.get("recipe") != b.config.get("recipe"):
                st.caption(f"A ({escaped(recipe_text(a))}) and B ({escaped(recipe_text(b))}) train different losses: "
                           "their curves share an axis but not a scale, so compare each one's shape, not their "
                           "heights.")
            if hidden:
                st.caption(f"{hidden} loss value(s) of zero or below are not drawn on the log scale.")
