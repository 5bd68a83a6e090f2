"""Layers page: kNN accuracy of every layer for the reference model and any finished runs, on one plot, and
for each run the linear CKA per layer to its reference (which layers changed)."""

import streamlit as st

import ui
from core.analysis.layers import cka_curves, cka_layers_figure, layer_curves, layers_figure
from core.runs.labels import run_labels, run_reference
from ui.run_picker import pick_runs

st.title("Layers")
st.caption("Each point classifies the test texts by the majority label of their 10 nearest training texts, by "
           "cosine similarity of the mean-pooled output of that layer (0 = the embedding layer), so the last layer "
           "matches the model's own kNN for a normalised mean-pooled model. Where a fine-tuned curve rises above "
           "the reference shows which layers learned to separate the labels; frozen layers (shaded) can only "
           "change through the layers below them.")

corpus = ui.require_corpus("Layers")

runs = pick_runs(corpus, key="layers_runs")
references = list(dict.fromkeys([ui.state.model_name(), *map(run_reference, runs)]))
models = {f"reference · {ui.model_label(name)}": name for name in references}
labels = run_labels(runs)  # two runs that differ only in, say, the teacher get two curves, told apart
models |= {labels[run.id]: run.artefacts["model"] for run in runs}

curves = ui.state.session_cache("layer_curves")  # (corpus, model) -> accuracies: adding a run computes one curve
missing = {label: name for label, name in models.items() if (corpus.fingerprint, name) not in curves}
if missing:
    with ui.guard("Computing the layer curves"), ui.progress_bar("Loading the models…") as bar:
        found = layer_curves({label: ui.get_model(name) for label, name in missing.items()}, corpus, bar)
        curves |= {(corpus.fingerprint, missing[label]): accs for label, accs in found.items()}

shown = {label: curves[(corpus.fingerprint, name)] for label, name in models.items()
         if (corpus.fingerprint, name) in curves}
if shown:
    ui.plot(layers_figure(shown, runs, len(corpus.test_texts)), "layer_curves", key="layers_chart")
    st.caption(f"Bars: each point's 95% interval over the {len(corpus.test_texts):,} {corpus.target_split} texts "
               "(Wilson).")

st.subheader("Which layers changed")
st.caption("Linear CKA between the reference's and the run's mean-pooled hidden states of the same texts, layer by "
           "layer: 1.0 = the layer represents the texts as before (up to rotation and scale), lower = it changed "
           "more. It reads the encodings the kNN curves above use.")
keys = {labels[run.id]: (corpus.fingerprint, run.artefacts["model"], run_reference(run)) for run in runs}
cka = ui.state.session_cache("layer_cka")  # (corpus, run model, reference) -> CKA per layer
missing = {label: key for label, key in keys.items() if key not in cka}
if missing:
    with ui.guard("Comparing the layers"), ui.progress_bar("Loading the models…") as bar:
        found = cka_curves({label: (ui.get_model(reference), ui.get_model(tuned))
                            for label, (_corpus, tuned, reference) in missing.items()}, corpus, bar)
        cka |= {missing[label]: values for label, values in found.items()}
shown = {label: cka[key] for label, key in keys.items() if key in cka}
if shown:
    ui.plot(cka_layers_figure(shown, runs), "layer_cka", key="layers_cka_chart")
elif not runs:
    st.caption("The CKA figure appears once a fine-tuned run is picked above.")
