"""The Layers page's data: kNN accuracy of every layer of each model (docs/definitions.md, Layer-wise kNN), the
linear CKA per layer between a run and its reference (which layers changed), and their figures with the runs'
frozen layers shaded. Both read the same cached per-layer encodings, one forward pass per batch and model."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import plotly.graph_objects as go

from core.analysis.plots import cka_figure, layer_curve_figure
from core.data.corpus import Corpus
from core.evaluation.evaluate import PhaseProgress, evaluate_layers, layer_cka
from core.runs.store import Run


def _named(progress: PhaseProgress | None, name: str) -> PhaseProgress | None:
    """The progress callback with `name` before each phase label, so a bar over several models says which."""
    if progress is None:
        return None
    return lambda label, done, total: progress(f"{name}: {label}", done, total)


def layer_curves(models: dict[str, object], corpus: Corpus,
                 progress: PhaseProgress | None = None) -> dict[str, list[float]]:
    """kNN accuracy of every layer (0 = embeddings) per named model, from one cached forward pass per batch."""
    return {name: [p["knn_accuracy"] for p in evaluate_layers(model, corpus, progress=_named(progress, name))]
            for name, model in models.items()}


def cka_curves(pairs: dict[str, tuple[object, object]], corpus: Corpus,
               progress: PhaseProgress | None = None) -> dict[str, list[float]]:
    """Linear CKA per layer (0 = embeddings; 1.0 = unchanged) for each named (reference, fine-tuned) model pair,
    from the same cached layer encodings the kNN curves use."""
    return {name: layer_cka(reference, tuned, corpus, progress=_named(progress, name))
            for name, (reference, tuned) in pairs.items()}


def layers_figure(curves: dict[str, list[float]], runs: list[Run], n_texts: int | None = None) -> go.Figure:
    """All kNN curves on one plot with the runs' frozen layers shaded; with `n_texts` (the test texts), each point's
    95% interval as an error bar."""
    return _shaded(partial(layer_curve_figure, n_texts=n_texts), curves, runs)


def cka_layers_figure(curves: dict[str, list[float]], runs: list[Run]) -> go.Figure:
    """The runs' CKA curves on one plot with their frozen layers shaded."""
    return _shaded(cka_figure, curves, runs)


def _shaded(draw: Callable[..., go.Figure], curves: dict[str, list[float]], runs: list[Run]) -> go.Figure:
    """`draw(curves, frozen_layers, frozen_embeddings)` with the runs' frozen layers shaded; runs frozen differently
    each get their own (overlapping, so darker where more runs froze) band naming them."""
    spans: dict[tuple[int, bool], list[str]] = {}
    for run in runs:
        span = (int(run.config.get("freeze_layers") or 0), bool(run.config.get("freeze_embeddings")))
        if span != (0, False):
            spans.setdefault(span, []).append(run.id)
    if len(spans) <= 1:
        return draw(curves, *next(iter(spans), (0, False)))
    fig = draw(curves)
    for (layers, embeddings), ids in spans.items():
        fig.add_vrect(x0=-0.5 if embeddings else 0.5, x1=layers + 0.5, fillcolor="grey", opacity=0.1,
                      line_width=0, annotation_text=f"frozen in {', '.join(ids)}", annotation_position="top right")
    return fig
