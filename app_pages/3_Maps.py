"""Maps page: reference vs fine-tuned embeddings side by side (t-SNE or UMAP), and what changed around a text."""

from functools import partial

import pandas as pd
import streamlit as st

import ui
from core.analysis.maps import (
    MAX_POINTS,
    NEIGHBOURS,
    available_points,
    map_data,
    map_figures,
    neighbours,
    point_options,
)
from core.runs.labels import run_reference
from ui.run_picker import pick_run

METHODS = {"t-SNE": "tsne", "UMAP": "umap"}
POINTS_KEY = "maps_points"
STATUS_COLOURS = {"kept": "#d3f9d8", "new": "#d0ebff", "lost": "#ffe3e3"}

st.title("Maps")
st.caption("Each text as a point, coloured by its label; hover to read it. The fine-tuned map starts from the "
           "reference map's layout, so a text whose neighbourhood did not change stays put. kNN accuracy: each "
           "test text classified by the majority label of its 10 nearest training texts.")

corpus = ui.require_corpus("Maps")


def points_control(total: int) -> int:
    """How many texts to plot: a few round sizes below the total, then all of them (up to the largest size)."""
    options = point_options(total)
    if st.session_state.get(POINTS_KEY) not in options:  # first view, or a corpus with other sizes
        st.session_state[POINTS_KEY] = min(MAX_POINTS.default, total)
    return st.select_slider(MAX_POINTS.label, options, key=POINTS_KEY, persist_state="session",
                            format_func=lambda n: f"all {n:,}" if n == total else f"{n:,}",
                            help="Drawn from the evaluation's training sample (up to 10,000 texts) and the test "
                                 "split, stratified by split and label; fewer points project faster.")


def select_point(chart_key: str, point_key: str) -> None:
    """A point clicked on either map becomes the picked text (customdata[0] is its row)."""
    points = st.session_state[chart_key].selection.points
    if points:
        st.session_state[point_key] = int(points[0]["customdata"][0])


def chart(fig, name: str, point_key: str) -> None:
    key = f"maps_chart:{name}"
    ui.plot(fig, f"{name}_map", key, on_select=partial(select_point, key, point_key), selection_mode="points")


def neighbour_table(frame: pd.DataFrame) -> None:
    styled = frame.style.map(lambda s: f"background-color: {STATUS_COLOURS.get(s, '')}", subset=["status"])
    st.dataframe(styled, hide_index=True, column_config={"cosine": st.column_config.NumberColumn(format="%.3f")})


method_col, points_col = st.columns([1, 2])
method_name = method_col.radio("Projection", list(METHODS), horizontal=True, key="maps_method",
                               persist_state="session")
with points_col:
    max_points = points_control(available_points(corpus))

ref_head, tuned_head = st.columns(2, vertical_alignment="bottom")
with tuned_head:
    run = pick_run(corpus, key="maps_run")
reference = run_reference(run) if run else ui.state.model_name()
ref_head.markdown(f"**Reference model** · `{ui.model_label(reference)}`", help=reference)

key = (corpus.fingerprint, reference, run.id if run else None, METHODS[method_name], max_points)
maps = ui.state.session_cache("maps")
if key not in maps:
    with ui.guard("Computing the maps"), ui.progress_bar("Loading the models…") as bar:
        tuned = ui.get_model(run.artefacts["model"]) if run else None
        data = map_data(ui.get_model(reference), tuned, corpus, METHODS[method_name], max_points,
                        progress=bar)
        maps.clear()  # the latest maps only: the disk caches make going back cheap
        maps[key] = data
if key not in maps:
    st.stop()
data = maps[key]

point_key = "maps_point:" + "|".join(map(str, key))  # rows differ between subsamples: a new pick per data
picked = st.session_state.get(point_key)
ref_fig, tuned_fig = map_figures(data, "Reference", "Fine-tuned", highlight=picked)
ref_col, tuned_col = st.columns(2)
with ref_col:
    chart(ref_fig, "reference", point_key)
if tuned_fig is not None:
    with tuned_col:
        chart(tuned_fig, "fine-tuned", point_key)
st.caption(f"{len(data):,} of {data.n_available:,} texts shown.")

if data.tuned is not None:
    st.subheader("Neighbours of a text")
    picked = st.selectbox("Click a point on either map, or search the plotted texts", range(len(data)),
                          index=None, key=point_key, placeholder="Type to search…",
                          format_func=lambda i: f"{data.texts[i][:100]} · {data.labels[i]}")
    if picked is not None:
        found = neighbours(data, picked)
        st.markdown(f"**Picked** · {data.labels[picked]} · {data.split[picked]}")
        st.text(data.texts[picked])  # plain text: a user's "$" or "*" must not turn into markup
        st.caption(f"The fine-tuned model kept {found.overlap:.0%} of the reference model's "
                   f"{NEIGHBOURS} nearest neighbours (cosine, among the plotted texts).")
        left, right = st.columns(2)
        with left:
            st.markdown("**Reference** · kept or lost")
            neighbour_table(found.reference)
        with right:
            st.markdown("**Fine-tuned** · kept or new")
            neighbour_table(found.tuned)
