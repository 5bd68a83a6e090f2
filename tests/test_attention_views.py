"""The Attention page's views: every layer from one forward pass per model and text, a layer picked from it, the
head grid (shared colour scale, numbered, one head outlined, clickable anywhere on a tile), token maps with the
tokens on both axes (thinned for long texts) and a colour bar, and the page through AppTest with the tiny model."""

from __future__ import annotations

import copy
import functools
import json
import math

import numpy as np
import pytest
import torch
from plotly.colors import sample_colorscale

import core.analysis.attention
from core.analysis.attention import compare_attention, layer_attention
from core.analysis.plots import TOKEN_LABELS, attention_head_grid, attention_token_map, token_weight_bars
from core.errors import UserError
from tests.conftest import no_errors
from tests.test_reliability_display import plotly_shows

TEXT = "the film was good but the story was long"


@pytest.fixture(scope="module")
def tuned(tiny_model):
    """The tiny model with its first layer's attention perturbed: a stand-in for a fine-tuned model."""
    model = copy.deepcopy(tiny_model)
    torch.manual_seed(2)
    with torch.no_grad():
        query = model[0].auto_model.encoder.layer[0].attention.self.query.weight
        query.add_(torch.randn_like(query))
    return model


def counting(model, monkeypatch) -> list[int]:
    """Count the forward passes of `model`'s transformer (the wrapper keeps its signature, which inputs are read by)."""
    hf = model[0].auto_model
    calls: list[int] = []
    original = hf.forward
    monkeypatch.setattr(hf, "forward", functools.wraps(original)(lambda *a, **k: calls.append(1) or original(*a, **k)))
    return calls


# ---------------------------------------------------------------- every layer from one pass


def test_every_layer_comes_from_one_pass_per_model(tiny_model, tuned, monkeypatch):
    ref_calls, tuned_calls = counting(tiny_model, monkeypatch), counting(tuned, monkeypatch)
    result = compare_attention(tiny_model, tuned, TEXT)
    assert (len(ref_calls), len(tuned_calls)) == (1, 1)
    monkeypatch.undo()

    # each layer picked from the pass is that layer's attention, as the model computes it on its own
    inputs = tiny_model.preprocess([TEXT])
    hf = tiny_model[0].auto_model
    previous, training = hf.config._attn_implementation, hf.training
    hf.set_attn_implementation("eager")  # sdpa gives no attention probabilities
    try:
        with torch.no_grad():
            own = hf.eval()(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                            output_attentions=True)
    finally:
        hf.set_attn_implementation(previous)
        hf.train(training)
    layers = hf.config.num_hidden_layers
    for layer in range(1, layers + 1):
        np.testing.assert_allclose(layer_attention(result["reference"], layer), own.attentions[layer - 1][0].numpy(),
                                   atol=1e-6)
    # fine-tuning changed the first layer only (the stand-in's), and the ATA weights come from the last layer
    assert not np.allclose(layer_attention(result["reference"], 1), layer_attention(result["tuned"], 1))
    expected = core.analysis.attention.ata_weights(torch.from_numpy(layer_attention(result["reference"], layers))[None],
                                                   torch.ones(1, len(result["tokens"])))[0].numpy()
    np.testing.assert_allclose(result["reference"]["weights"], expected, rtol=1e-6)


@pytest.mark.parametrize("layer", [0, 3, -1, 1.0, True, "2", None])
def test_a_layer_out_of_range_is_one_clear_message(tiny_model, layer):
    side = compare_attention(tiny_model, None, TEXT)["reference"]
    with pytest.raises(UserError, match=r"does not exist: this model has layers 1 to 2\."):
        layer_attention(side, layer)


@pytest.mark.parametrize("text, tokens", [
    (".", ["[CLS]", ".", "[SEP]"]),
    ("\u200b", ["[CLS]", "[SEP]"]),  # nothing the tokenizer keeps: the special tokens alone
    ('<b>"x"</b> & y', ["[CLS]", "[UNK]", "b", "[UNK]", '"', "x", '"', "[UNK]", "[UNK]", "b", "[UNK]", "&", "y",
                        "[SEP]"]),
])
def test_tiny_and_markup_texts_give_maps_labelled_as_typed(tiny_model, text, tokens):
    result = compare_attention(tiny_model, None, text)
    assert result["tokens"] == tokens and result["note"] is None
    attn = layer_attention(result["reference"], 1)
    grid = attention_head_grid(attn, "grid")
    assert [np.asarray(t.z).shape for t in grid.data[:-1]] == [(len(tokens), len(tokens))] * 2
    fig = attention_token_map(attn[0], tokens, "head", "attention")
    assert [plotly_shows(t) for t in fig.layout.xaxis.ticktext] == tokens
    assert [plotly_shows(t) for t in fig.layout.yaxis.ticktext] == tokens
    assert plotly_shows(fig.data[0].text[0][-1]) == f"#0 [CLS] → #{len(tokens) - 1} [SEP]"


# ---------------------------------------------------------------- figure builders


def test_head_grid_small_multiples_on_one_scale_with_one_head_outlined():
    rng = np.random.default_rng(0)
    attn = rng.random((6, 5, 5)).astype(np.float32)
    fig = attention_head_grid(attn, "Reference · layer 1, all heads", zmax=2.0, selected=4, cols=4)
    heatmaps, lattice = fig.data[:-1], fig.data[-1]
    assert [t.name for t in heatmaps] == [f"head {h}" for h in range(1, 7)]
    assert {t.coloraxis for t in heatmaps} == {"coloraxis"} and fig.layout.coloraxis.cmax == 2.0
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.colorbar.title.text
    for h, trace in enumerate(heatmaps):
        np.testing.assert_allclose(np.asarray(trace.z, dtype=np.float32), attn[h])
    assert [a.text for a in fig.layout.annotations] == ["head 1", "head 2", "head 3", "head 4", "<b>head 5</b>",
                                                        "head 6"]
    # head 5 starts the second tile row: its tile is outlined, below the first row and left of head 6's
    five, six = heatmaps[4], heatmaps[5]
    (outline,) = fig.layout.shapes
    assert (outline.x0, outline.y0) == (five.x0 - 0.5, five.y0 - 0.5) and outline.x1 == five.x0 + 4.5
    assert five.y0 > heatmaps[0].y0 + 5 and six.x0 > five.x0 + 5
    # the click targets: points over every tile, each naming the head whose tile it lies on
    heads_at = np.asarray(lattice.customdata)
    assert sorted(set(heads_at.tolist())) == list(range(1, 7))
    for x, y, head in zip(lattice.x, lattice.y, heads_at):
        tile = heatmaps[head - 1]
        assert tile.x0 <= x <= tile.x0 + 4 and tile.y0 <= y <= tile.y0 + 4
    assert "click to enlarge" in lattice.hovertemplate and all(t.hoverinfo == "skip" for t in heatmaps)


def test_head_grid_refuses_a_wrong_shape_and_survives_non_finite_values():
    with pytest.raises(ValueError, match="heads, S, S"):
        attention_head_grid(np.zeros((2, 3, 4)), "bad")
    with pytest.raises(ValueError, match="heads, S, S"):
        attention_head_grid(np.zeros((0, 3, 3)), "bad")
    broken = np.full((2, 3, 3), np.nan)
    assert attention_head_grid(broken, "nan").layout.coloraxis.cmax is None  # plotly's own scale
    assert attention_token_map(np.full((3, 3), np.inf), ["a", "b", "c"], "inf", "attention").data[0].zmax is None


def test_token_map_labels_every_token_with_a_colour_bar():
    tokens = ["[CLS]", "the", "cat", "the", "[SEP]"]  # a repeated token keeps its own row and column
    z = np.arange(25, dtype=np.float32).reshape(5, 5) / 25
    fig = attention_token_map(z, tokens, "Reference · layer 2, sum over heads", "sum over 2 heads", zmax=1.5,
                              colorscale="Oranges")
    (trace,) = fig.data
    assert list(fig.layout.xaxis.ticktext) == tokens and list(fig.layout.yaxis.ticktext) == tokens
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 3, 4] and fig.layout.yaxis.autorange == "reversed"
    assert fig.layout.xaxis.title.text == "key token (all 5)" and fig.layout.yaxis.title.text == "query token (all 5)"
    assert trace.colorbar.title.text == "sum over 2 heads" and (trace.zmin, trace.zmax) == (0, 1.5)
    assert trace.text[1][3] == "#1 the → #3 the"
    # colours on a square-root scale: a quarter of the scale's top gets the colour half-way along Oranges
    stops = dict((round(v, 6), c) for v, c in trace.colorscale)
    assert stops[0.3] == sample_colorscale("Oranges", [math.sqrt(0.3)])[0]
    with pytest.raises(ValueError, match="5 tokens"):
        attention_token_map(z[:4], tokens, "bad", "attention")


def test_long_texts_thin_the_token_labels_and_say_how_many():
    tokens = [f"w{i}" for i in range(100)]
    fig = attention_token_map(np.zeros((100, 100)), tokens, "long", "attention")
    every = math.ceil(100 / TOKEN_LABELS)
    assert list(fig.layout.xaxis.tickvals) == list(range(0, 100, every))
    assert list(fig.layout.xaxis.ticktext) == tokens[::every] and len(fig.layout.xaxis.ticktext) <= TOKEN_LABELS
    assert fig.layout.xaxis.title.text == f"key token ({len(tokens[::every])} of 100 labelled, hover for all)"
    assert np.asarray(fig.data[0].text).shape == (100, 100)  # hover names every pair still
    bars = token_weight_bars(tokens * 3, [0.0] * 300, [0.0] * 300)
    assert 0 < len(bars.layout.xaxis.ticktext) <= 2 * TOKEN_LABELS and "of 300 labelled" in bars.layout.xaxis.title.text


# ---------------------------------------------------------------- the page


def charts(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def titles(at) -> list[str]:
    return [c["layout"]["title"]["text"] for c in charts(at)]


def test_page_layer_choice_and_enlarged_head_without_recomputing(app, monkeypatch):
    calls = []
    real = core.analysis.attention.read_attention
    monkeypatch.setattr(core.analysis.attention, "read_attention", lambda *a: calls.append(a[1]) or real(*a))
    app.run()
    at = app.switch_page("app_pages/6_Attention.py").run()
    no_errors(at)
    assert at.select_slider(key="attention_layer:2").value == 2  # the last layer, as ATA uses
    assert titles(at) == ["Reference · layer 2, all heads", "Reference · layer 2, head 1",
                          "Reference · layer 2, sum over heads", "ATA token weights (last layer)"]
    assert not any("stay those of the last layer" in c.value for c in at.caption)
    assert len(calls) == 1

    at.select_slider(key="attention_layer:2").set_value(1).run()
    no_errors(at)
    assert titles(at)[:3] == ["Reference · layer 1, all heads", "Reference · layer 1, head 1",
                              "Reference · layer 1, sum over heads"]
    assert any("stay those of the last layer (2)" in c.value and "show layer 1" in c.value for c in at.caption)
    at.selectbox(key="attention_head:2").set_value(2).run()
    no_errors(at)
    grid, enlarged, summed, _ = charts(at)
    assert enlarged["layout"]["title"]["text"] == "Reference · layer 1, head 2"
    assert [a["text"] for a in grid["layout"]["annotations"]] == ["head 1", "<b>head 2</b>"]
    assert "sum over 2 heads" in summed["data"][0]["colorbar"]["title"]["text"]
    assert len(calls) == 1  # switching layer and head drew from the one pass


def test_page_very_long_and_markup_texts(app):
    app.run()
    at = app.switch_page("app_pages/6_Attention.py").run()
    at.radio(key="attention_source").set_value("Type a text").run()
    at.text_input(key="attention_typed").set_value("word " * 20_000).run()
    no_errors(at)
    assert [i.value for i in at.info][-1] == ("This text is 20002 tokens long; the model reads only its first 128 "
                                              "(its maximum length), so the maps show those.")
    enlarged = charts(at)[1]
    assert enlarged["layout"]["xaxis"]["title"]["text"] == "key token (26 of 128 labelled, hover for all)"

    at.text_input(key="attention_typed").set_value("<b>bold</b> & [x](y)").run()
    no_errors(at)
    ticks = charts(at)[1]["layout"]["yaxis"]["ticktext"]
    assert [plotly_shows(t) for t in ticks][:4] == ["[CLS]", "[UNK]", "b", "[UNK]"] and "&amp;" in ticks
    assert not any("tokens long" in i.value for i in at.info)
