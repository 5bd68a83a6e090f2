"""Attention page: where a chosen layer looks, per head (one enlarged) and summed over heads, and which tokens ATA
pooling weighs, reference vs fine-tuned side by side for one text."""

import streamlit as st

import ui
from core.analysis.attention import compare_attention, layer_attention
from core.analysis.plots import attention_head_grid, attention_token_map, token_weight_bars
from ui.layout import literal
from ui.run_picker import pick_run

st.title("Attention")
st.caption("Maps: a layer's attention, rows = query tokens, columns = the tokens they attend to, colours on a "
           "square-root scale so that small attention still shows. The grid shows every head on one colour scale; "
           "click a head (or pick it below) to enlarge it with its tokens. The summed map adds the heads' attention "
           "probabilities, so each row sums to the number of heads. Bars: ATA token "
           "weights (see Definitions, ATA pooling), the last layer's attention each token receives from all queries "
           "and heads, normalised to sum 1 — the tokens an ATA-pooled embedding is made of.")

corpus = ui.require_corpus("Attention")

SOURCES = (f"From the {corpus.target_split} split", "Type a text")

text_box, run_box = st.columns(2)
with text_box:
    typed = st.radio("Text", SOURCES, horizontal=True, key="attention_source", persist_state="session") == SOURCES[1]
    if typed:
        text = st.text_input("Your text", key="attention_typed", persist_state="session",
                             placeholder="e.g. The striker scored twice in extra time.")
    else:
        text = st.selectbox("Corpus text", corpus.test_texts, key="attention_text", label_visibility="collapsed")
with run_box:
    run = pick_run(corpus, key="attention_run")


def changes_note(changes: dict) -> None:
    def listing(rows: list[dict]) -> str:
        return ", ".join(f"{literal(r['token'])} ({r['delta']:+.3f})" for r in rows) or "none"

    st.markdown(f"**Gained weight:** {listing(changes['gained'])}  \n**Lost weight:** {listing(changes['lost'])}")


def charts(result: dict, layer: int, head: int) -> list[tuple[str, object]]:
    """(chart key, figure) in reading order: head grids, enlarged heads, summed maps, each model's side by side.
    Both models share each colour scale, so equal colours mean equal attention."""
    tokens = result["tokens"]
    sides = {name: layer_attention(result[side], layer)
             for name, side in (("Reference", "reference"), ("Fine-tuned", "tuned")) if result[side]}
    heads = result["reference"]["attention"].shape[1]
    top = max(float(attn.max()) for attn in sides.values())
    top_sum = max(float(attn.sum(0).max()) for attn in sides.values())
    sum_scale = f"sum over {heads} heads (each row sums to {heads})"
    return ([(f"attention_grid:{name}", attention_head_grid(attn, f"{name} · layer {layer}, all heads", top,
                                                            selected=head - 1)) for name, attn in sides.items()]
            + [(f"attention_enlarged:{name}", attention_token_map(attn[head - 1], tokens, f"{name} · layer {layer}, "
                                                                  f"head {head}", "attention", top))
               for name, attn in sides.items()]
            + [(f"attention_sum:{name}", attention_token_map(attn.sum(0), tokens, f"{name} · layer {layer}, sum over "
                                                             "heads", sum_scale, top_sum, colorscale="Oranges"))
               for name, attn in sides.items()])


shown = ui.state.session_cache("attention")
key = (ui.state.model_name(), run.id if run else None, text)
with ui.guard("Reading the attention"), st.spinner("Running the models on the text…"):
    if key not in shown:
        tuned = ui.get_model(run.artefacts["model"]) if run else None
        shown.clear()  # keep only the text on show: every layer's maps are layers x heads x S x S per model
        result = compare_attention(ui.get_model(), tuned, text or "")
        bars = token_weight_bars(result["tokens"], result["reference"]["weights"],
                                 (result["tuned"] or result["reference"])["weights"])
        if result["tuned"] is None:
            bars.update_traces(visible=False, selector={"name": "fine-tuned"})
        shown[key] = {"result": result, "bars": bars, "view": None, "charts": []}


def enlarge(chart: str, head_key: str) -> None:
    """A click on a head's tile in `chart` enlarges that head: the point clicked carries its head's number."""
    points = st.session_state[chart].selection.points
    if points:
        st.session_state[head_key] = int(points[0]["customdata"])


if key in shown:
    entry = shown[key]
    result = entry["result"]
    layers, heads = result["reference"]["attention"].shape[:2]
    head_key = f"attention_head:{heads}"  # per head count: a remembered head always exists in this model
    layer_box, head_box = st.columns(2)
    with layer_box:
        layer = st.select_slider("Layer", options=list(range(1, layers + 1)), value=layers,
                                 key=f"attention_layer:{layers}")
        if layer != layers:
            st.caption(f"The ATA token weights below stay those of the last layer ({layers}): ATA is defined on it. "
                       f"Only the maps show layer {layer}.")
    with head_box:
        head = st.selectbox("Enlarged head", list(range(1, heads + 1)), key=head_key,
                            help="Or click a head in the grid.")
    if result["note"]:
        st.info(result["note"])
    with ui.guard("Drawing the attention maps"):
        if entry["view"] != (layer, head):  # plotly's figure building, not the models, is what a rerun waits for
            entry["view"], entry["charts"] = (layer, head), charts(result, layer, head)
        for start in range(0, len(entry["charts"]), 2):
            for column, (chart, fig) in zip(st.columns(2), entry["charts"][start:start + 2]):
                with column:
                    clicks = ({"on_select": lambda chart=chart: enlarge(chart, head_key), "selection_mode": "points"}
                              if chart.startswith("attention_grid") else {})
                    ui.plot(fig, chart.replace(":", "_").lower(), key=chart, **clicks)
    ui.plot(entry["bars"], "ata_token_weights", key="attention_weights")
    if result["weight_changes"]:
        changes_note(result["weight_changes"])
