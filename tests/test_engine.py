"""ONNX Runtime for the passes that do not train (issue 32, item 1): the exported graph gives torch's embeddings and
every layer's mean within 1e-5, is exported once per weights fingerprint, and is never used where it differs, cannot
be exported, or does not apply; torch then encodes, with the reason in the log."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from core.errors import UserError
from core.models import engine
from core.models.encode import encode, encode_cached
from core.models.loading import model_fingerprint
from core.storage import cache_dir
from core.training.top_layers import top_layers_view

TEXTS = [f"text number {i} says " + "the word is good and " * (i % 9) + "then it ends" for i in range(40)]
TEXTS.append("a very long text " * 200)  # truncated at the model's max_seq_length


def _torch(model, texts, monkeypatch, **kwargs):
    monkeypatch.setenv(engine.ENV, "torch")
    return encode(model, texts, layers=True, **kwargs)


def _graphs() -> list[str]:
    return sorted(path.name for path in cache_dir("onnx").glob("*.onnx"))


def test_the_graph_gives_torchs_embeddings_and_layers_and_is_exported_once(tiny_model, monkeypatch):
    reference = _torch(tiny_model, TEXTS, monkeypatch)
    monkeypatch.setenv(engine.ENV, "onnx")
    got = encode(tiny_model, TEXTS, layers=True)
    fingerprint = model_fingerprint(tiny_model)
    assert _graphs() == [f"{fingerprint}-encode.onnx"]
    verdict = json.loads((cache_dir("onnx") / f"{fingerprint}-encode.json").read_text())
    assert verdict["usable"] and verdict["max_difference"] <= engine.TOLERANCE
    np.testing.assert_allclose(got.embeddings, reference.embeddings, atol=engine.TOLERANCE)
    np.testing.assert_allclose(got.layers, reference.layers, atol=engine.TOLERANCE)

    runs: list[int] = []
    real_runner = engine.Graph.runner
    monkeypatch.setattr(engine.Graph, "runner", lambda self: runs.append(1) or real_runner(self))
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: pytest.fail("exported a second time"))
    again = encode(tiny_model, TEXTS[:5])  # short, pooled only: the graph on disk is used as it is
    assert runs and np.allclose(again.embeddings, reference.embeddings[:5], atol=engine.TOLERANCE)


def _busy(monkeypatch, free: int) -> None:
    """A 2-core machine with `free` cores that other work leaves."""
    monkeypatch.setattr(engine, "free_cores", lambda: free)
    monkeypatch.setattr(engine, "usable_cores", lambda: 2)


def test_auto_exports_only_for_a_long_encode_then_uses_the_graph_for_any(tiny_model, monkeypatch):
    monkeypatch.setenv(engine.ENV, "auto")
    _busy(monkeypatch, free=1)
    fingerprint = model_fingerprint(tiny_model)
    encode_cached(tiny_model, TEXTS, fingerprint=fingerprint)
    assert _graphs() == []  # 41 texts: an export would cost more than it saves
    monkeypatch.setattr(engine, "MIN_TEXTS", len(TEXTS))
    encode(tiny_model, TEXTS)
    assert _graphs() == [f"{fingerprint}-encode.onnx"]
    monkeypatch.setattr(engine, "MIN_TEXTS", 10**9)
    used: list[int] = []
    real_runner = engine.Graph.runner
    monkeypatch.setattr(engine.Graph, "runner", lambda self: used.append(1) or real_runner(self))
    encode(tiny_model, TEXTS[:3])  # no fingerprint given: a short encode does not hash the weights to look
    assert not used
    encode_cached(tiny_model, TEXTS[:3], fingerprint=fingerprint)
    assert used


def test_a_graph_that_differs_from_torch_is_never_used_and_says_why(tiny_model, monkeypatch, caplog):
    reference = _torch(tiny_model, TEXTS, monkeypatch)
    monkeypatch.setenv(engine.ENV, "onnx")
    monkeypatch.setattr(engine, "TOLERANCE", -1.0)  # any difference, even 0, is too large
    with caplog.at_level(logging.WARNING, logger="contrastlab.engine"):
        got = encode(tiny_model, TEXTS, layers=True)
    np.testing.assert_array_equal(got.embeddings, reference.embeddings)  # torch's own result
    assert _graphs() == []  # the graph is removed; its verdict stays
    assert "ONNX graph (encode) is not used, its outputs differ from torch's" in caplog.text
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: pytest.fail("tried the export again"))
    np.testing.assert_array_equal(encode(tiny_model, TEXTS).embeddings, reference.embeddings)


def test_an_export_that_fails_leaves_torch_to_encode_and_is_not_retried(tiny_model, monkeypatch, caplog):
    reference = _torch(tiny_model, TEXTS, monkeypatch)
    monkeypatch.setenv(engine.ENV, "onnx")

    def broken(*args, **kwargs):
        raise RuntimeError("unsupported operator aten::something")

    monkeypatch.setattr(torch.onnx, "export", broken)
    with caplog.at_level(logging.WARNING, logger="contrastlab.engine"):
        got = encode(tiny_model, TEXTS)
    np.testing.assert_array_equal(got.embeddings, reference.embeddings)
    assert "unsupported operator aten::something" in caplog.text
    assert not list(cache_dir("onnx").glob("*.tmp")) and not list(cache_dir("onnx").glob(".*"))
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: pytest.fail("tried the export again"))
    encode(tiny_model, TEXTS)


def test_attentions_stay_on_torch(tiny_model, monkeypatch):
    monkeypatch.setenv(engine.ENV, "onnx")
    got = encode(tiny_model, TEXTS[:4], attentions=True)
    assert got.attentions is not None and _graphs() == []


def test_the_frozen_layers_cache_of_the_quick_point_matches_torch(tiny_model, monkeypatch):
    monkeypatch.setenv(engine.ENV, "torch")
    with top_layers_view(tiny_model, 1, TEXTS) as view:
        reference = dict(view.states)
    monkeypatch.setenv("CONTRASTLAB_HOME", str(cache_dir("onnx").parents[2] / "second-home"))
    monkeypatch.setenv(engine.ENV, "onnx")
    with top_layers_view(tiny_model, 1, TEXTS) as view:
        got = dict(view.states)
    assert _graphs() == [f"{model_fingerprint(tiny_model)}-below-{view.split}.onnx"]
    assert got.keys() == reference.keys()
    assert max(float((got[key] - reference[key]).abs().max()) for key in got) <= engine.TOLERANCE


@pytest.mark.parametrize("value", ["gpu", "0", "1", "onnx,torch", "é", "x" * 5000, "nan"])
def test_a_bad_engine_choice_is_one_user_error_line(value, tiny_model, monkeypatch):
    monkeypatch.setenv(engine.ENV, value)
    for attentions in (False, True):  # refused even where the engine would not apply
        with pytest.raises(UserError) as raised:
            encode(tiny_model, TEXTS[:2], attentions=attentions)
        message = str(raised.value)
        assert engine.ENV in message and "\n" not in message and len(message) < 200


def test_engine_choices_are_read_loosely(monkeypatch):
    for value, expected in [("", "auto"), ("  ", "auto"), (" ONNX ", "onnx"), ("Torch", "torch")]:
        monkeypatch.setenv(engine.ENV, value)
        assert engine.choice() == expected, value
    monkeypatch.delenv(engine.ENV)
    assert engine.choice() == "auto"


def test_old_graphs_are_pruned_and_exported_again_when_their_model_encodes_again(tiny_model, monkeypatch):
    monkeypatch.setenv(engine.ENV, "onnx")
    monkeypatch.setattr(engine, "KEPT_GRAPHS", 1)
    fingerprint = model_fingerprint(tiny_model)
    reference = encode(tiny_model, TEXTS).embeddings
    with top_layers_view(tiny_model, 1, TEXTS) as view:  # a second graph: the first is pruned
        pass
    assert _graphs() == [f"{fingerprint}-below-{view.split}.onnx"]
    exports: list[int] = []
    real_export = torch.onnx.export
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: exports.append(1) or real_export(*a, **k))
    again = encode(tiny_model, TEXTS).embeddings
    assert exports == [1] and _graphs() == [f"{fingerprint}-encode.onnx"]
    np.testing.assert_allclose(again, reference, atol=engine.TOLERANCE)


def test_an_encode_samples_the_free_cores_once_and_spins_only_with_every_core_free(tiny_model, monkeypatch):
    """Sampling the cores takes 0.1 s: once per encode, not per batch. A session's threads spin while they wait
    only where no other work needs the cores."""
    monkeypatch.setenv(engine.ENV, "onnx")
    encode(tiny_model, TEXTS)  # exported and checked
    samples: list[int] = []
    free = {"cores": 2}
    monkeypatch.setattr(engine, "free_cores", lambda: samples.append(1) or free["cores"])
    monkeypatch.setattr(engine, "usable_cores", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    made: list[tuple] = []
    real_session = engine._session
    monkeypatch.setattr(engine, "_session", lambda path, threads, spin: made.append((threads, spin))
                        or real_session(path, threads, spin))
    encode(tiny_model, TEXTS * 4, batch_size=8)  # 21 batches
    free["cores"] = 1
    encode(tiny_model, TEXTS * 4, batch_size=8)
    assert samples == [1, 1] and made == [(2, True), (1, False)]


def test_auto_leaves_an_idle_machine_to_torch(tiny_model, monkeypatch):
    """On an idle 2-core machine torch encoded as fast as ONNX Runtime or faster (engine.MIN_TEXTS's note)."""
    monkeypatch.setenv(engine.ENV, "auto")
    monkeypatch.setattr(engine, "MIN_TEXTS", len(TEXTS))
    _busy(monkeypatch, free=2)
    encode(tiny_model, TEXTS)
    assert _graphs() == []
    _busy(monkeypatch, free=1)
    encode(tiny_model, TEXTS)
    assert _graphs() == [f"{model_fingerprint(tiny_model)}-encode.onnx"]


def test_auto_leaves_the_quick_points_frozen_layers_on_an_idle_machine_to_torch(tiny_model, monkeypatch):
    """Once torch ran only the layers below the split, it cached the frozen states of 10,872 SST-2 texts in 18.9 s
    on an idle machine, against 23.4 s with the graph's export."""
    monkeypatch.setenv(engine.ENV, "auto")
    monkeypatch.setattr(engine, "MIN_TEXTS", len(TEXTS))
    _busy(monkeypatch, free=2)
    with top_layers_view(tiny_model, 1, TEXTS):
        pass
    assert _graphs() == []
    monkeypatch.setenv("CONTRASTLAB_HOME", str(cache_dir("onnx").parents[2] / "second-home"))  # not cached yet
    _busy(monkeypatch, free=1)
    with top_layers_view(tiny_model, 1, TEXTS) as view:
        pass
    assert _graphs() == [f"{model_fingerprint(tiny_model)}-below-{view.split}.onnx"]
