"""One-pass encoding: same vectors as SentenceTransformer.encode, all layers and attentions from one pass,
and a disk cache that really avoids the model."""

import numpy as np
import pytest

from core.models import encode as enc
from core.models.ata import build_ata_model
from core.storage import cache_dir

TEXTS = [
    "the film was good",
    "a very long sentence about the sea and the mountain near the city where children play",
    "bad",
    "people said the game was great fun",
    "the market fell",
]


def test_pooled_matches_sentence_transformers_encode(tiny_model):
    ours = enc.encode(tiny_model, TEXTS, batch_size=2).embeddings
    theirs = tiny_model.encode(TEXTS, batch_size=2, convert_to_numpy=True)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_layers_and_attentions_in_one_pass(tiny_model, monkeypatch):
    hf = tiny_model[0].model
    calls = []
    original = hf.forward
    monkeypatch.setattr(hf, "forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    out = enc.encode(tiny_model, TEXTS, batch_size=2, layers=True, attentions=True)
    assert len(calls) == 3  # ceil(5 / 2) batches, one pass each
    n_layers = hf.config.num_hidden_layers
    assert out.layers.shape == (n_layers + 1, len(TEXTS), hf.config.hidden_size)
    # the last layer's masked mean equals the mean-pooled output before normalisation
    last = out.layers[-1]
    np.testing.assert_allclose(last / np.linalg.norm(last, axis=1, keepdims=True), out.embeddings, atol=1e-5)
    for text, att, toks in zip(TEXTS, out.attentions, out.tokens):
        assert att.shape[0] == hf.config.num_attention_heads
        assert att.shape[1] == att.shape[2] == len(toks)
        np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-4)  # padding removed: rows still sum to 1
        assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    assert out.attentions[2].shape[1] < out.attentions[1].shape[1]


def test_attention_implementation_restored(tiny_model):
    hf = tiny_model[0].model
    before = hf.config._attn_implementation
    enc.encode(tiny_model, TEXTS[:2], attentions=True)
    assert hf.config._attn_implementation == before


def test_cache_hit_does_not_run_model(tiny_model, monkeypatch):
    first = enc.encode_cached(tiny_model, TEXTS)
    monkeypatch.setattr(enc, "encode", lambda *a, **k: pytest.fail("cache miss"))
    again = enc.encode_cached(tiny_model, TEXTS)
    np.testing.assert_array_equal(first, again)
    files = list(cache_dir("embeddings").glob("*.npy"))
    assert files and not list(cache_dir("embeddings").glob("*.tmp*"))


def test_cache_key_separates_texts_and_kind(tiny_model):
    a = enc.encode_cached(tiny_model, TEXTS)
    b = enc.encode_cached(tiny_model, TEXTS[:3])
    layers = enc.encode_cached(tiny_model, TEXTS, layers=True)
    assert a.shape[0] == 5 and b.shape[0] == 3 and layers.ndim == 3


def test_corrupt_cache_entry_is_recomputed(tiny_model):
    a = enc.encode_cached(tiny_model, TEXTS)
    for f in cache_dir("embeddings").glob("*.npy"):
        f.write_bytes(b"garbage")
    np.testing.assert_allclose(enc.encode_cached(tiny_model, TEXTS), a)


def test_count_overlong(tiny_model):
    limit = tiny_model.max_seq_length
    long_text = " ".join(["water"] * (limit + 5))
    assert enc.count_overlong(tiny_model, ["short text", long_text]) == 1


def test_empty_input(tiny_model):
    assert enc.encode(tiny_model, []).embeddings.shape[0] == 0


def test_ata_model_encodes_like_its_own_encode(tiny_model):
    ata = build_ata_model(tiny_model)
    ours = enc.encode(ata, TEXTS, batch_size=2, layers=True).embeddings
    np.testing.assert_allclose(ours, ata.encode(TEXTS, batch_size=2), atol=1e-5)
