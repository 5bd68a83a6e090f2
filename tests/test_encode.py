"""One-pass encoding: same vectors as SentenceTransformer.encode, all layers and attentions from one pass,
and a disk cache that really avoids the model."""

import json

import numpy as np
import pytest

from core.errors import Cancelled
from core.models import encode as enc
from core.models.ata import build_ata_model
from core.storage import cache_dir, load_array
from tests.tiny_model import SECOND_PASS_ATOL

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


def test_count_overlong_in_chunks_reports_progress(tiny_model, monkeypatch):
    long_text = " ".join(["water"] * (tiny_model.max_seq_length + 5))
    texts = ["short text", long_text, "another", long_text, "x"]
    monkeypatch.setattr(enc, "OVERLONG_CHUNK", 2)
    calls = []
    assert enc.count_overlong(tiny_model, texts, progress=lambda d, t: calls.append((d, t))) == 2
    assert calls == [(2, 5), (4, 5), (5, 5)]


def test_batches_are_grouped_by_token_count_not_characters(tiny_model, monkeypatch):
    # characters and tokens disagree: a long word of letters outside the vocabulary is one token ([UNK]), "a b c d e f"
    # is six
    long_word, many_words = "Ω" * 30, "a b c d e f"
    texts = [long_word, many_words, "Ω", "a b c d e g"]
    counts = enc.token_counts(tiny_model, texts)
    assert counts[0] < counts[1] and len(long_word) > len(many_words)
    seen = []
    real = enc.encode_batch
    monkeypatch.setattr(enc, "encode_batch", lambda model, batch, *a, **k: seen.append(list(batch))
                        or real(model, batch, *a, **k))
    out = enc.encode(tiny_model, texts, batch_size=2).embeddings
    assert seen == [[many_words, "a b c d e g"], [long_word, "Ω"]]  # each batch pads to its own longest
    np.testing.assert_allclose(out, tiny_model.encode(texts, convert_to_numpy=True), atol=1e-5)  # rows in text order
    overlong = " ".join(["water"] * (tiny_model.max_seq_length + 5))  # truncated: costs the limit, like others there
    assert list(enc.longest_first(tiny_model, ["x", overlong, " ".join(["water"] * tiny_model.max_seq_length)])) \
        == [1, 2, 0]


# ---------------------------------------------------------------- streaming to the cache

MANY = [f"{t} {i}" if i % 3 else t for i in range(4) for t in TEXTS]  # 20 texts, 10 batches of 2, lengths mixed


@pytest.mark.parametrize("layers", [False, True], ids=["pooled", "layers"])
def test_streamed_entry_is_exactly_the_in_memory_encode(tiny_model, layers, monkeypatch):
    """A miss writes batch by batch into the entry: the entry is bit for bit what the call returned, and both equal an
    in-memory encode. That one is a second forward pass, compared within SECOND_PASS_ATOL."""
    memory = enc.encode(tiny_model, MANY, batch_size=2, layers=layers)
    streamed = enc.encode_cached(tiny_model, MANY, layers=layers, batch_size=2)
    np.testing.assert_allclose(streamed, memory.layers if layers else memory.embeddings, rtol=0,
                               atol=SECOND_PASS_ATOL)
    entries = sorted(cache_dir("embeddings").glob("*.npy"))
    assert [p.name.rsplit("-", 1)[1] for p in entries] == (["layers.npy", "pooled.npy"] if layers else ["pooled.npy"])
    written = {}
    for path in entries:  # each with a sidecar as save_array writes it, so the one reader accepts it
        kind = path.name.rsplit("-", 1)[1].removesuffix(".npy")
        expected = memory.layers if kind == "layers" else memory.embeddings
        assert json.loads(path.with_name(path.name + ".json").read_text())["shape"] == list(expected.shape)
        written[kind] = load_array(path, expected.shape)
        np.testing.assert_allclose(written[kind], expected, rtol=0, atol=SECOND_PASS_ATOL)
    np.testing.assert_array_equal(written["layers" if layers else "pooled"], streamed)
    monkeypatch.setattr(enc, "encode", lambda *a, **k: pytest.fail("cache miss"))
    np.testing.assert_array_equal(enc.encode_cached(tiny_model, MANY), written["pooled"])  # the pooled entry too


def test_each_batch_is_on_disk_when_progress_counts_it(tiny_model):
    """What the temp entry holds at each progress call is, bit for bit, those rows of what the call returns."""
    seen, snapshots = [], []

    def check(done: int, total: int) -> None:
        (tmp,) = cache_dir("embeddings").glob(".*.tmp")  # the entry being written, not yet in place
        on_disk = np.load(tmp, mmap_mode="r")
        written = np.flatnonzero(np.abs(on_disk).sum(1) > 0)
        assert len(written) == done
        snapshots.append((written, np.array(on_disk[written])))
        seen.append(done)

    result = enc.encode_cached(tiny_model, MANY, batch_size=2, progress=check)
    assert seen == list(range(2, len(MANY) + 1, 2))
    for written, rows in snapshots:
        np.testing.assert_array_equal(rows, result[written])
    second = enc.encode(tiny_model, MANY, batch_size=2).embeddings
    np.testing.assert_allclose(result, second, rtol=0, atol=SECOND_PASS_ATOL)


def interrupt_third_batch(kind: str, patch: pytest.MonkeyPatch):
    """(progress, error): a progress callback that cancels, or a forward pass that crashes, after two batches."""
    if kind == "cancelled":
        def progress(done, _total):
            if done > 4:
                raise Cancelled()
        return progress, Cancelled
    real, calls = enc._forward, []

    def crash(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("out of memory")
        return real(*args, **kwargs)

    patch.setattr(enc, "_forward", crash)
    return None, RuntimeError


@pytest.mark.parametrize("layers", [False, True], ids=["pooled", "layers"])
@pytest.mark.parametrize("kind", ["cancelled", "failed"])
def test_an_interrupted_streamed_encode_leaves_no_entry(tiny_model, layers, kind, monkeypatch):
    with monkeypatch.context() as patch:
        progress, error = interrupt_third_batch(kind, patch)
        with pytest.raises(error):
            enc.encode_cached(tiny_model, MANY, layers=layers, batch_size=2, progress=progress)
    assert list(cache_dir("embeddings").iterdir()) == []  # no body, no sidecar, no temp file
    again = enc.encode_cached(tiny_model, MANY, layers=layers, batch_size=2)
    expected = enc.encode(tiny_model, MANY, batch_size=2, layers=layers)
    np.testing.assert_allclose(again, expected.layers if layers else expected.embeddings, rtol=0,
                               atol=SECOND_PASS_ATOL)


def test_empty_input(tiny_model):
    assert enc.encode(tiny_model, []).embeddings.shape[0] == 0
    config = tiny_model[0].auto_model.config
    assert enc.encode(tiny_model, [], layers=True).layers.shape == (config.num_hidden_layers + 1, 0,
                                                                   config.hidden_size)
    assert enc.encode_cached(tiny_model, []).shape == (0, tiny_model.get_embedding_dimension())


def test_ata_model_encodes_like_its_own_encode(tiny_model):
    ata = build_ata_model(tiny_model)
    ours = enc.encode(ata, TEXTS, batch_size=2, layers=True).embeddings
    np.testing.assert_allclose(ours, ata.encode(TEXTS, batch_size=2), atol=1e-5)
