"""Attention page: where the last layer looks, per head, and which tokens ATA pooling weighs, reference vs
fine-tuned side by side for one text."""

import streamlit as st

import ui
from core.analysis.attention import compare_attention
from core.analysis.plots import attention_heatmaps, token_weight_bars
from ui.layout import literal
from ui.run_picker import pick_run

st.title("Attention")
st.caption("Heatmaps: the last layer's attention per head (rows = query tokens, columns = the tokens they attend "
           "to) and summed over heads. Bars: ATA token weights (see Definitions, ATA pooling), the attention each "
           "token receives from all queries and heads, normalised to sum 1 — the tokens an ATA-pooled embedding is "
           "made of.")

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


def figures(result: dict) -> dict:
    """The page's figures for one result, built once: plotly's figure building, not the models, is what a
    revisit would otherwise wait for (13 heatmaps per model)."""
    tokens, ref, tuned = result["tokens"], result["reference"], result["tuned"]
    sides = [("Reference", ref), *([("Fine-tuned", tuned)] if tuned else [])]
    heads = {name: attention_heatmaps(side["attention"], tokens, f"{name} · last-layer attention")
             for name, side in sides}
    bars = token_weight_bars(tokens, ref["weights"], tuned["weights"] if tuned else ref["weights"])
    if tuned is None:
        bars.update_traces(visible=False, selector={"name": "fine-tuned"})
    return {"heads": heads, "bars": bars, "changes": result["weight_changes"]}


shown = ui.state.session_cache("attention")
key = (ui.state.model_name(), run.id if run else None, text)
with ui.guard("Reading the attention"), st.spinner("Running the models on the text…"):
    if key not in shown:
        tuned = ui.get_model(run.artefacts["model"]) if run else None
        shown.clear()  # keep only the text on show: attention maps are S x S per head
        shown[key] = figures(compare_attention(ui.get_model(), tuned, text or ""))

if key in shown:
    view = shown[key]
    for column, (name, fig) in zip(st.columns(len(view["heads"])), view["heads"].items()):
        with column:
            ui.plot(fig, f"attention_{name.lower()}", key=f"attention_heads:{name}")
    ui.plot(view["bars"], "ata_token_weights", key="attention_weights")
    if view["changes"]:
        changes_note(view["changes"])
