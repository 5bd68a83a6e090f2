"""Figure builders: trace counts, titles, axis titles and hover contents on small synthetic inputs."""

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from core.analysis.plots import (
    hover_text,
    label_colours,
    layer_curve_figure,
    loss_curve_figure,
    map_figure,
    token_weight_bars,
    tradeoff_figure,
)
from core.evaluation.uncertainty import proportion_ci


def _axis_titles(fig: go.Figure) -> list[str]:
    layout = fig.to_plotly_json()["layout"]
    return [v["title"]["text"] for k, v in layout.items() if k.startswith(("xaxis", "yaxis")) and "title" in v]


def _check_axes(fig: go.Figure, n_axes: int = 2) -> None:
    titles = _axis_titles(fig)
    assert len(titles) >= n_axes and all(titles)


def test_map_figure_one_trace_per_label_with_consistent_colours():
    rng = np.random.default_rng(0)
    coords = rng.normal(size=(12, 2))
    labels = ["pos", "neg", "neu"] * 4
    texts = [f"text <b>{i}</b> " + "word " * 80 for i in range(12)]
    fig = map_figure(coords, labels, texts, "reference — kNN accuracy 0.91", method="t-SNE")
    assert len(fig.data) == 3 and fig.layout.title.text == "reference — kNN accuracy 0.91"
    assert [t.name for t in fig.data] == ["neg", "neu", "pos"]
    _check_axes(fig)
    assert fig.layout.xaxis.title.text == "t-SNE 1"
    neg = fig.data[0]
    assert [row[0] for row in neg.customdata] == [1, 4, 7, 10]  # rows in coords, for selection events
    np.testing.assert_allclose(neg.x, coords[[1, 4, 7, 10], 0])
    assert "&lt;b&gt;" in neg.customdata[0][1] and "<b>1" not in neg.customdata[0][1]
    # The fine-tuned map with a highlighted point: same colours per label, plus one ring trace.
    tuned = map_figure(coords + 1, labels, texts, "fine-tuned", highlight=4)
    assert len(tuned.data) == 4 and tuned.data[-1].name == "picked"
    assert [t.marker.color for t in tuned.data[:3]] == [t.marker.color for t in fig.data]
    with pytest.raises(ValueError):
        map_figure(coords, labels[:5], texts, "bad")


def test_label_colours_and_hover_text():
    assert label_colours(["b", "a", "b"]) == label_colours(["a", "b"])
    assert len(set(label_colours([str(i) for i in range(40)]).values())) == 40
    short = hover_text("x" * 500)
    assert short.endswith("…") and len(short.replace("<br>", "")) <= 200


def test_layer_curve_figure_lines_and_frozen_band():
    curves = {"reference": [0.5, 0.6, 0.7], "fine-tuned": [0.5, 0.65, 0.9]}
    fig = layer_curve_figure(curves, frozen_layers=1, frozen_embeddings=True)
    assert len(fig.data) == 2 and list(fig.data[1].x) == [0, 1, 2]
    (band,) = [s for s in fig.layout.shapes if s.type == "rect"]
    assert (band.x0, band.x1) == (-0.5, 1.5)
    _check_axes(fig)
    assert fig.layout.xaxis.title.text == "layer (0 = embeddings)"
    assert not [s for s in layer_curve_figure(curves).layout.shapes if s.type == "rect"]
    (only_layers,) = layer_curve_figure(curves, frozen_layers=2).layout.shapes
    assert (only_layers.x0, only_layers.x1) == (0.5, 2.5)  # layer 0 (embeddings) still trains
    assert fig.data[0].error_y.array is None  # no test-text count, no bars
    bars = layer_curve_figure(curves, n_texts=100).data[1]
    assert list(bars.customdata[2]) == pytest.approx(list(proportion_ci(0.9, 100)))
    assert bars.error_y.arrayminus[2] == pytest.approx(0.9 - proportion_ci(0.9, 100)[0])


def _point(name, p, s, recipe="TripletLoss", margin=0.1, ref=False):
    return {"name": name, "polarity": p, "polarity_sd": 20.0, "similarity": s, "similarity_sd": 7.0,
            "recipe": recipe, "margin": margin, "is_reference": ref}


def test_tradeoff_figure_reference_recipes_and_front():
    points = [
        _point("all-MiniLM-L6-v2", 63.0, 46.6, recipe=None, margin=None, ref=True),
        _point("triplet m=0.1", 80.6, 35.2),
        _point("triplet m=5", 81.3, 29.6, margin=5.0),
        _point("contrastive", 70.0, 30.0, recipe="ContrastiveLoss", margin=0.5),
    ]
    fig = tradeoff_figure(points, bars="sd")
    assert [t.name for t in fig.data] == ["reference", "TripletLoss", "ContrastiveLoss", "Pareto front"]
    ref, triplet, _, front = fig.data
    assert ref.marker.symbol == "star" and triplet.marker.symbol == "circle"
    assert list(triplet.error_y.array) == [20.0, 20.0] and list(triplet.error_x.array) == [7.0, 7.0]
    assert list(front.y) == [63.0, 80.6, 81.3]  # the ContrastiveLoss run is dominated
    assert triplet.customdata[1][2] == "5" and ref.customdata[0][2] == "–"
    assert "margin" in triplet.hovertemplate and "recipe" in triplet.hovertemplate
    assert "P@16" in fig.layout.yaxis.title.text and "S@16" in fig.layout.xaxis.title.text
    assert fig.layout.title.text
    assert len(tradeoff_figure([]).data) == 0
    nan_run = tradeoff_figure([_point("failed", math.nan, math.nan), _point("ok", 50.0, 40.0)])
    assert list(nan_run.data[-1].y) == [50.0]


def test_token_weight_bars_grouped():
    fig = token_weight_bars(["[CLS]", "good", "[SEP]"], [0.2, 0.5, 0.3], [0.1, 0.8, 0.1])
    assert [t.name for t in fig.data] == ["reference", "fine-tuned"] and fig.layout.barmode == "group"
    assert list(fig.layout.xaxis.ticktext) == ["[CLS]", "good", "[SEP]"]
    _check_axes(fig)
    with pytest.raises(ValueError):
        token_weight_bars(["a"], [1.0], [0.5, 0.5])


def test_loss_curve_figure_with_and_without_evals():
    losses = [{"step": s, "loss": 1.0 / s} for s in range(1, 6)]
    plain = loss_curve_figure(losses)
    assert len(plain.data) == 1 and plain.layout.title.text
    _check_axes(plain)
    evals = [{"step": 2, "polarity": 70.0, "similarity": 40.0, "knn_accuracy": 0.8},
             {"step": 4, "polarity": 75.0, "similarity": 38.0, "knn_accuracy": 0.85}]
    fig = loss_curve_figure(losses, evals)
    assert [t.name for t in fig.data] == ["training loss", "P@k", "S@k", "kNN accuracy"]
    assert list(fig.data[3].y) == [80.0, 85.0]
    assert fig.layout.yaxis2.title.text == "score (%)"
    _check_axes(fig, n_axes=3)


def test_the_training_progress_score_axis_ticks_at_the_figures_precision():
    """Issue 51: the score axis of the training-progress chart read 58.07 and 77.215."""
    from core.analysis.plots import loss_curve_figure

    evals = [{"step": 0, "polarity": 58.07, "similarity": 77.215}, {"step": 4, "polarity": 58.2, "similarity": 77.3}]
    fig = loss_curve_figure([{"step": 1, "loss": 0.5}, {"step": 4, "loss": 0.4}], evals)
    assert fig.layout.yaxis2.tickformat == ".1f"
    with_tau = loss_curve_figure([], [{"step": 0, "kendall_tau": 0.1}, {"step": 3, "kendall_tau": 0.2}])
    assert with_tau.layout.yaxis2.tickformat == ".3f"


def test_maps_use_their_panel_s_width_and_tell_anger_from_love():
    """Issue 51: a map filled about half of a 430 px panel (a fixed square aspect), and anger and love were drawn in
    blue and violet."""
    import numpy as np

    from core.analysis.plots import label_colours, map_figure

    labels = ["anger", "fear", "joy", "love", "sadness", "surprise"]
    fig = map_figure(np.random.default_rng(0).normal(size=(6, 2)), labels, labels, "map")
    assert fig.layout.yaxis.scaleanchor is None
    colours = label_colours(labels)

    def rgb(colour: str) -> np.ndarray:
        return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)

    assert np.linalg.norm(rgb(colours["anger"]) - rgb(colours["love"])) > 200  # blue and red
