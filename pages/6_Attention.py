"""Attention page: where the last layer looks, per head, and which tokens ATA pooling weighs, reference vs
fine-tuned side by side for one text."""

import streamlit as st

import ui
from core.attention import compare_attention
from core.plots import attention_heatmaps, token_weight_bars
from ui import runs_view
from ui.run_picker import pick_run

ui.page_setup("Attention", ":material/visibility:")
st.title("Attention")
st.caption("Heatmaps: the last layer's attention per head (rows = query tokens, columns = the tokens they attend "
           "to) and summed over heads. Bars: ATA token weights (DESIGN §3.7), the attention each token receives "
           "from all queries and heads, normalised to sum 1 — the tokens an ATA-pooled embedding is made of.")

corpus = ui.require_corpus()

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
        return ", ".join(f"`{r['token']}` ({r['delta']:+.3f})" for r in rows) or "none"

    st.markdown(f"**Gained weight:** {listing(changes['gained'])}  \n**Lost weight:** {listing(changes['lost'])}")


result = None
results = ui.state.session_cache("attention")
key = (ui.state.model_name(), run.id if run else None, text)
with ui.guard("Reading the attention"), st.spinner("Running the models on the text…"):
    if key not in results:
        tuned = ui.get_model(run.artefacts["model"]) if run else None
        results.clear()  # keep only the text on show: attention maps are S x S per head
        results[key] = compare_attention(ui.get_model(), tuned, text or "")
    result = results[key]

if result is not None:
    tokens, ref, tuned = result["tokens"], result["reference"], result["tuned"]
    sides = [("Reference", ref), *([("Fine-tuned", tuned)] if tuned else [])]
    for column, (name, side) in zip(st.columns(len(sides)), sides):
        with column:
            runs_view.plot(attention_heatmaps(side["attention"], tokens, f"{name} · last-layer attention"),
                           f"attention_{name.lower()}", key=f"attention_heads:{name}")
    bars = token_weight_bars(tokens, ref["weights"], tuned["weights"] if tuned else ref["weights"])
    if tuned is None:
        bars.update_traces(visible=False, selector={"name": "fine-tuned"})
    runs_view.plot(bars, "ata_token_weights", key="attention_weights")
    if result["weight_changes"]:
        changes_note(result["weight_changes"])
