"""Layers page: kNN accuracy of every layer for the reference model and any finished runs, on one plot."""

import streamlit as st

import ui
from core.analysis.layers import layer_curves, layers_figure
from core.runs.labels import run_label, run_reference
from ui.run_picker import pick_runs

st.title("Layers")
st.caption("Each point classifies the test texts by the majority label of their 10 nearest training texts, "
           "using the mean-pooled output of that layer (0 = the embedding layer). Where a fine-tuned curve "
           "rises above the reference shows which layers learned to separate the labels; frozen layers "
           "(shaded) can only change through the layers below them.")

corpus = ui.require_corpus("Layers")

runs = pick_runs(corpus, key="layers_runs")
references = list(dict.fromkeys([ui.state.model_name(), *map(run_reference, runs)]))
models = {f"reference · {ui.model_label(name)}": name for name in references}
models |= {run_label(run): run.artefacts["model"] for run in runs}

curves = ui.state.session_cache("layer_curves")  # (corpus, model) -> accuracies: adding a run computes one curve
missing = {label: name for label, name in models.items() if (corpus.fingerprint, name) not in curves}
if missing:
    with ui.guard("Computing the layer curves"), ui.progress_bar("Loading the models…") as bar:
        found = layer_curves({label: ui.get_model(name) for label, name in missing.items()}, corpus, bar)
        curves |= {(corpus.fingerprint, missing[label]): accs for label, accs in found.items()}

shown = {label: curves[(corpus.fingerprint, name)] for label, name in models.items()
         if (corpus.fingerprint, name) in curves}
if shown:
    ui.plot(layers_figure(shown, runs), "layer_curves", key="layers_chart")
