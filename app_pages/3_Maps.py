"""Maps page: reference vs fine-tuned embeddings side by side (t-SNE or UMAP), coloured by label, split or how much
each text's neighbourhood changed; arrows for the texts that moved most; what changed around a picked text; the
texts selected with a box or lasso."""

from functools import partial

import pandas as pd
import streamlit as st

import ui
from core.analysis.maps import (
    ARROWS,
    CHANGE,
    COLOURS,
    FLIP,
    MAX_POINTS,
    NEIGHBOURS,
    MapData,
    available_points,
    map_data,
    map_figures,
    moved_most,
    neighbours,
    point_options,
    selected_rows,
    selection_table,
)
from core.runs.labels import run_reference
from ui.run_picker import pick_run

METHODS = {"t-SNE": "tsne", "UMAP": "umap"}
POINTS_KEY = "maps_points"
COLOUR_KEY = "maps_colour"
PICKED = "maps_picked"  # the picked text itself: rows differ between subsamples, a text does not
SELECTED = "maps_selected"  # the texts of the latest box or lasso selection
STATUS_COLOURS = {"kept": "#d3f9d8", "new": "#d0ebff", "lost": "#ffe3e3"}
CHANGE_HELP = (f"The share of a text's {NEIGHBOURS} nearest neighbours under the reference model (cosine, among the "
               "plotted texts) that are not among its nearest under the fine-tuned model: measured on the embeddings, "
               "not on the 2-D maps, whose distances t-SNE and UMAP distort.")

st.title("Maps")
st.caption("Each text as a point, coloured by its label, its split or how much its neighbourhood changed; hover to "
           "read it. The fine-tuned map starts from the reference map's layout, so a text whose neighbourhood did "
           "not change stays put. kNN accuracy: each test text classified by the majority label of its 10 nearest "
           "training texts.")

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


def colour_control(data: MapData) -> str:
    colours = list(COLOURS if data.tuned is not None else COLOURS[:2])
    if st.session_state.get(COLOUR_KEY) not in colours:  # first view, or neighbourhood change without a run
        st.session_state[COLOUR_KEY] = colours[0]
    return st.radio("Colour by", colours, horizontal=True, key=COLOUR_KEY, persist_state="session",
                    help="Both maps take the same colours, so they compare. Split: the evaluation's training sample "
                         f"or the test texts. Neighbourhood change (with a fine-tuned run): {CHANGE_HELP} kNN flip "
                         "(with a fine-tuned run): whether each test text's kNN vote went right → wrong, wrong → "
                         "right or stayed, from the reference to the fine-tuned model; the Runs page lists them.")


def arrows_control(data: MapData) -> int:
    """How many arrows to draw: 0 when off. The widget keeps the count whole and within ARROWS' bounds."""
    if not st.toggle("Arrows for the texts that moved most", key="maps_arrows_on", persist_state="session",
                     help="On the fine-tuned map, an arrow from each text's place on the reference map to its place "
                          "on the fine-tuned one (the reference map fitted onto the fine-tuned map's scale first). "
                          "The texts are those whose neighbourhood changed most, ties broken by how far they moved "
                          "on the map: neighbourhood change is measured on the embeddings, while a map can shift a "
                          "text whose neighbours stayed the same."):
        return 0
    n = st.number_input("How many arrows", min_value=int(ARROWS.low), max_value=int(ARROWS.high),
                        value=ARROWS.default, step=1, key="maps_arrows", persist_state="session", help=ARROWS.help)
    if n > len(data):
        st.caption(f"{n:,} is more than the {len(data):,} texts plotted: arrows for every text that changed.")
    return n


def take_selection(chart_key: str, texts: list[str]) -> None:
    """A click on one point picks its text; a box or lasso selection replaces the selected texts (kept as texts, so
    they stay selected when the maps are redrawn: picked, recoloured, projected anew)."""
    selection = st.session_state[chart_key].selection
    rows = selected_rows(selection.points)
    if selection.box or selection.lasso or len(rows) != 1:
        st.session_state[SELECTED] = [texts[i] for i in rows]
    else:
        st.session_state[PICKED] = texts[rows[0]]


def chart(fig, name: str, texts: list[str]) -> None:
    key = f"maps_chart:{name}"
    ui.plot(fig, f"{name}_map", key, on_select=partial(take_selection, key, texts),
            selection_mode=("points", "box", "lasso"))


def pick_text(widget_key: str, texts: list[str]) -> None:
    row = st.session_state[widget_key]
    st.session_state[PICKED] = None if row is None else texts[row]


def neighbour_table(frame: pd.DataFrame) -> None:
    styled = frame.style.map(lambda s: f"background-color: {STATUS_COLOURS.get(s, '')}", subset=["status"])
    st.dataframe(styled, hide_index=True, column_config={"cosine": st.column_config.NumberColumn(format="%.3f")})


method_col, points_col = st.columns([1, 2])
method_name = method_col.radio("Projection", list(METHODS), horizontal=True, key="maps_method",
                               persist_state="session",  # a box drawn on one projection selects nothing on another
                               on_change=lambda: st.session_state.pop(SELECTED, None))
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

colour_col, arrows_col = st.columns([3, 2])
with colour_col:
    colour = colour_control(data)
    if colour == FLIP:
        st.caption(data.flips_text() + ".")
arrows = 0
if data.tuned is not None:
    with arrows_col:
        arrows = arrows_control(data)
picked = next(iter(data.rows_of([st.session_state.get(PICKED)])), None)
selected = data.rows_of(st.session_state.get(SELECTED) or [])
with st.spinner("Comparing each text's neighbours under both models…" if data.tuned is not None else "Drawing…",
                show_time=True):
    ref_fig, tuned_fig = map_figures(data, "Reference", "Fine-tuned", highlight=picked, colour=colour, arrows=arrows,
                                     selected=selected)
ref_col, tuned_col = st.columns(2)
with ref_col:
    chart(ref_fig, "reference", data.texts)
if tuned_fig is not None:
    with tuned_col:
        chart(tuned_fig, "fine-tuned", data.texts)
shown = f"{len(data):,} of {data.n_available:,} texts shown."
if arrows:
    moved = len(moved_most(data, arrows))
    shown += (f" Arrows for the {moved:,} texts whose neighbourhood changed most." if moved == arrows else
              f" Arrows for all {moved:,} texts whose neighbourhood changed.")
both = data.tuned is not None
st.caption(shown + f" Drag on {'either map' if both else 'the map'} to select the texts in a box (the toolbar has "
                   "lasso, zoom and pan) and list them below"
           + ("; click a point to see its neighbours under both models." if both else "."))

if selected:
    st.subheader(f"Selected texts · {len(selected):,}")
    st.dataframe(selection_table(data, selected), hide_index=True, column_config={
        CHANGE: st.column_config.ProgressColumn(CHANGE, format="percent", min_value=0.0, max_value=1.0,
                                                help=CHANGE_HELP)})
    st.button("Clear the selection", on_click=lambda: st.session_state.pop(SELECTED, None),
              icon=":material/deselect:")

if data.tuned is not None:
    st.subheader("Neighbours of a text")
    pick_key = "maps_pick:" + "|".join(map(str, key))  # one widget per map data: its options are that data's rows
    st.session_state[pick_key] = picked  # the kept text, wherever it sits in this data
    picked = st.selectbox("Click a point on either map, or search the plotted texts", range(len(data)),
                          index=None, key=pick_key, placeholder="Type to search…",
                          format_func=lambda i: f"{data.texts[i][:100]} · {data.labels[i]}",
                          on_change=pick_text, args=(pick_key, data.texts))
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
