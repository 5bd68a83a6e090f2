"""compare_attention on the tiny model: consistent shapes, ATA weights that sum to 1, the tokens that gained and
lost weight, long texts cut with a note, and clear errors for texts that cannot be shown."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import core.analysis.attention
from core.analysis.attention import compare_attention, read_attention, weight_changes
from core.errors import UserError
from core.models.ata import build_ata_model

TEXT = "the film was good but the story was long"


@pytest.fixture(scope="module")
def tuned(tiny_model):
    """The tiny model with its last layer's attention perturbed: a stand-in for a fine-tuned model."""
    model = copy.deepcopy(tiny_model)
    torch.manual_seed(1)
    with torch.no_grad():
        query = model[0].auto_model.encoder.layer[-1].attention.self.query.weight
        query.add_(torch.randn_like(query))
    return model


def test_read_attention_for_the_attention_page(tiny_model):
    long_text = "a long story about a man and his dog who lived near the sea"
    ata = build_ata_model(tiny_model)
    found = read_attention(ata, long_text)
    tokens, weights, attention = found["tokens"], found["weights"], found["attention"]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "dog" in tokens and found["length"] == len(tokens)
    assert weights.shape == (len(tokens),) and attention.shape == (2, 2, len(tokens), len(tokens))  # layers, heads
    np.testing.assert_allclose(weights.sum(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(attention.sum(-1), 1.0, rtol=1e-5)
    # the ATA pooling's own weights, from the last layer
    with torch.no_grad():
        pooled = ata.eval().forward(ata.preprocess([long_text]))["ata_weights"][0].numpy()
    np.testing.assert_allclose(weights, pooled, rtol=1e-5)
    # a plain (sdpa) model gives the same answer, and stays sdpa
    plain = read_attention(tiny_model, long_text)
    assert plain["tokens"] == tokens
    np.testing.assert_allclose(plain["weights"], weights, rtol=1e-5)
    assert tiny_model[0].auto_model.config._attn_implementation == "sdpa"


def test_shapes_weights_and_changes(tiny_model, tuned):
    result = compare_attention(tiny_model, tuned, TEXT)
    tokens = result["tokens"]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "film" in tokens
    s = len(tokens)
    config = tiny_model[0].auto_model.config
    for side in (result["reference"], result["tuned"]):
        assert side["attention"].shape == (config.num_hidden_layers, config.num_attention_heads, s, s)
        np.testing.assert_allclose(side["attention"].sum(-1), 1.0, atol=1e-5)  # rows are distributions
        assert side["weights"].shape == (s,)
        assert side["weights"].sum() == pytest.approx(1.0, abs=1e-5) and (side["weights"] >= 0).all()
    assert not np.allclose(result["reference"]["weights"], result["tuned"]["weights"])

    delta = result["tuned"]["weights"] - result["reference"]["weights"]
    gained, lost = result["weight_changes"]["gained"], result["weight_changes"]["lost"]
    assert 0 < len(gained) <= 5 and 0 < len(lost) <= 5
    assert [g["delta"] for g in gained] == sorted((g["delta"] for g in gained), reverse=True)
    assert [x["delta"] for x in lost] == sorted(x["delta"] for x in lost)
    assert gained[0]["delta"] == pytest.approx(delta.max()) and lost[0]["delta"] == pytest.approx(delta.min())
    for row in gained + lost:
        assert row["token"] == tokens[row["position"]]
        assert row["delta"] == pytest.approx(delta[row["position"]])


def test_reference_alone(tiny_model):
    result = compare_attention(tiny_model, None, "  the film was good  ")
    assert result["tuned"] is None and result["weight_changes"] is None and result["note"] is None
    assert result["tokens"] == ["[CLS]", "the", "film", "was", "good", "[SEP]"]


def test_weight_changes_top_five_and_no_zero_deltas():
    tokens = list("abcdefgh")
    ref = np.full(8, 1 / 8)
    tuned = ref + np.array([0.07, 0.01, 0.0, -0.02, 0.03, -0.06, 0.02, -0.05])
    changes = weight_changes(tokens, ref, tuned)
    assert [g["token"] for g in changes["gained"]] == ["a", "e", "g", "b"]
    assert [x["token"] for x in changes["lost"]] == ["f", "h", "d"]  # "c" did not change: in neither list
    many = weight_changes(list("abcdefgh"), np.zeros(8), np.arange(1, 9, dtype=float))
    assert [g["token"] for g in many["gained"]] == ["h", "g", "f", "e", "d"] and many["lost"] == []


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_text_is_refused(tiny_model, text):
    with pytest.raises(UserError, match="Type a text first"):
        compare_attention(tiny_model, None, text)


def test_long_text_is_cut_with_a_note(tiny_model, monkeypatch):
    """Past the model's maximum length (128 for the tiny model) the maps show what the model reads; a lower cap on
    the maps (MAX_TOKENS) runs the model on the first MAX_TOKENS tokens alone. Either way the note says so."""
    result = compare_attention(tiny_model, tiny_model, " ".join(["word"] * 300))
    assert len(result["tokens"]) == tiny_model.max_seq_length == 128 and result["tokens"][-1] == "[SEP]"
    assert result["note"] == ("This text is 302 tokens long; the model reads only its first 128 (its maximum length), "
                              "so the maps show those.")
    assert result["reference"]["attention"].shape[-1] == 128 and result["tuned"]["weights"].shape == (128,)

    monkeypatch.setattr(core.analysis.attention, "MAX_TOKENS", 8)
    result = compare_attention(tiny_model, None, " ".join(["word"] * 10))
    assert result["tokens"] == ["[CLS]", *["word"] * 6, "[SEP]"]
    assert result["note"].startswith("This text is 12 tokens long; the maps show its first 8 (the model run on those")


def test_other_tokenizer_is_refused(tiny_model, monkeypatch):
    real = core.analysis.attention.read_attention
    other = object()

    def fake(model, text):
        found = real(tiny_model, text)
        return {**found, "tokens": [t.upper() for t in found["tokens"]]} if model is other else found

    monkeypatch.setattr(core.analysis.attention, "read_attention", fake)
    with pytest.raises(UserError, match="other tokens"):
        compare_attention(tiny_model, other, TEXT)
