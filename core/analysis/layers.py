"""The Layers page's data: kNN accuracy of every layer of each model (docs/definitions.md, Layer-wise kNN),
and the figure with the runs' frozen layers shaded. Encodings come from the disk cache, one pass per batch."""

from __future__ import annotations

import plotly.graph_objects as go

from core.analysis.plots import layer_curve_figure
from core.data.corpus import Corpus
from core.evaluation.evaluate import PhaseProgress, evaluate_layers
from core.runs.store import Run


def layer_curves(models: dict[str, object], corpus: Corpus,
                 progress: PhaseProgress | None = None) -> dict[str, list[float]]:
    """kNN accuracy of every layer (0 = embeddings) per named model, from one cached forward pass per batch."""
    out = {}
    for name, model in models.items():
        prefixed = (lambda label, done, total, name=name: progress(f"{name}: {label}", done, total)) \
            if progress else None
        out[name] = [p["knn_accuracy"] for p in evaluate_layers(model, corpus, progress=prefixed)]
    return out


def layers_figure(curves: dict[str, list[float]], runs: list[Run]) -> go.Figure:
    """All curves on one plot with the runs' frozen layers shaded; runs frozen differently each get their
    own (overlapping, so darker where more runs froze) band naming them."""
    spans: dict[tuple[int, bool], list[str]] = {}
    for run in runs:
        span = (int(run.config.get("freeze_layers") or 0), bool(run.config.get("freeze_embeddings")))
        if span != (0, False):
            spans.setdefault(span, []).append(run.id)
    if len(spans) <= 1:
        return layer_curve_figure(curves, *next(iter(spans), (0, False)))
    fig = layer_curve_figure(curves)
    for (layers, embeddings), ids in spans.items():
        fig.add_vrect(x0=-0.5 if embeddings else 0.5, x1=layers + 0.5, fillcolor="grey", opacity=0.1,
                      line_width=0, annotation_text=f"frozen in {', '.join(ids)}", annotation_position="top right")
    return fig
