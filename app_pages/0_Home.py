"""Home page: what the app does, what this session works on, and where to go next."""

import streamlit as st

import ui
from core.data.kinds import kind_of
from ui.layout import escaped

st.title("ContrastLab")
st.markdown(
    "Fine-tune a sentence-embedding model on your own labelled corpus with contrastive objectives, then "
    "**see what the fine-tuning did**: whether the classes now separate, whether the model kept its general "
    "sense of meaning, which layers changed and where its attention goes. Every result compares the "
    "fine-tuned model with its frozen reference and can be reproduced headless with `python -m core`."
)

corpus = ui.state.corpus()
cards = st.columns([2.2, 1, 1, 1.8, 1])
if corpus is not None:
    cards[0].metric("Corpus", corpus.name, border=True, help=f"Split: {corpus.report.split_source}")
    for card, (label, value, about) in zip(cards[1:3], kind_of(corpus).cards(corpus)):
        card.metric(label, value, border=True, help=about)
model = ui.state.model_name()
shown = ui.model_label(model)
with cards[3].container(border=True):  # a path's folder name in large type, the full path below it, wrapping
    st.metric("Reference model", shown)
    if shown != model:
        st.caption(escaped(model))
cards[4].metric("Device", ui.device(), border=True)

st.subheader("Workflow")
for step in (*ui.nav.WORKFLOW, ui.nav.DEFINITIONS):
    link, blurb = st.columns([1, 3], vertical_alignment="center")
    with link:
        ui.nav.link(step)
    blurb.caption(step.blurb)
