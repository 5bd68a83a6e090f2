"""Quick margin points train only the top layers from cached frozen states (core.training.top_layers): the top-only
forward equals the full model's, only the top layers change, the cache is reused, the point is labelled, and the
CLI's `quick` command reports it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import core.jobs.quick
from core import cli
from core.analysis.tradeoff import tradeoff_points
from core.data.corpus import demo_corpus_path, load_corpus
from core.errors import UserError
from core.evaluation.evaluate import evaluate
from core.jobs import launch, worker
from core.jobs.quick import QUICK_BUDGET, QUICK_TOP, quick_config, quick_run, quick_text, quick_top_layers
from core.models.encode import encode
from core.models.loading import load_model
from core.runs.store import RunStore
from core.storage import cache_dir
from core.training.config import TrainConfig
from core.training.top_layers import TopLayers, record_frozen_states, split_layer, top_layers_view
from core.training.trainer import SilentReporter, run_training
from tests.tiny_model import SECOND_PASS_ATOL, build_tiny_model

TEXTS = ["a short one", "the film was long, slow and far too loud for its own good", "x", "great cast",
         "a considerably longer sentence about movies and actors, with commas, and a twist at the end"]


@pytest.fixture(scope="module")
def deep_dir(tmp_path_factory) -> Path:
    """A tiny BERT with 4 layers: deep enough that 'top 2' leaves layers frozen below."""
    return build_tiny_model(tmp_path_factory.mktemp("deep") / "model", layers=4)


@pytest.fixture
def deep(deep_dir):
    return load_model(str(deep_dir), device="cpu")


@pytest.mark.parametrize("top", [1, 2, 4])
def test_top_layers_forward_equals_the_full_model(deep, top):
    full = encode(deep, TEXTS).embeddings
    with top_layers_view(deep, top, TEXTS[:2]) as view:  # the others are computed on a miss
        assert isinstance(deep[0].auto_model, TopLayers)
        fast = encode(deep, TEXTS).embeddings
        assert view.misses == len(TEXTS) - 2
    np.testing.assert_allclose(fast, full, atol=1e-5)
    assert type(deep[0].auto_model).__name__ == "BertModel"  # restored
    np.testing.assert_allclose(encode(deep, TEXTS).embeddings, full, rtol=0, atol=SECOND_PASS_ATOL)


def test_layer_requests_run_the_whole_model(deep):
    """Layer-wise states (and attentions) need every layer's output: the view passes such calls through."""
    full = encode(deep, TEXTS, layers=True).layers
    with top_layers_view(deep, 2):
        np.testing.assert_allclose(encode(deep, TEXTS, layers=True).layers, full, atol=1e-6)


def test_frozen_states_are_cached_on_disk(deep, monkeypatch):
    with top_layers_view(deep, 2, TEXTS) as first:
        states = dict(first.states)

    def no_forward(*args, **kwargs):
        raise AssertionError("cached states must not be computed again")

    monkeypatch.setattr(TopLayers, "lower", no_forward)
    with top_layers_view(deep, 2, TEXTS) as second:
        encode(deep, TEXTS)
        assert second.misses == 0 and set(second.states) == set(states)
        for key, value in states.items():
            torch.testing.assert_close(second.states[key], value)


def test_a_damaged_cache_is_recomputed(deep):
    with top_layers_view(deep, 2, TEXTS) as first:
        states = dict(first.states)
    entries = list(cache_dir("embeddings").glob("*frozen-below-2*.npy"))
    assert len(entries) == 2  # the states and their tokens
    for path in entries:
        path.write_bytes(b"garbage")
    with top_layers_view(deep, 2, TEXTS) as second:
        encode(deep, TEXTS)
        assert second.misses == 0 and set(second.states) == set(states)


@pytest.fixture
def in_torch_here(monkeypatch):
    """Encodes in this process in torch (not ONNX Runtime, not encode workers), whatever the machine's load: the
    only encodes whose frozen states a full pass can record."""
    monkeypatch.setenv("CONTRASTLAB_ENGINE", "torch")
    monkeypatch.setenv("CONTRASTLAB_ENCODE_WORKERS", "0")


def _counting_lower(monkeypatch) -> list[int]:
    """Rows TopLayers.lower computes, per call."""
    calls: list[int] = []
    lower = TopLayers.lower

    def counted(self, input_ids, *args, **kwargs):
        calls.append(len(input_ids))
        return lower(self, input_ids, *args, **kwargs)

    monkeypatch.setattr(TopLayers, "lower", counted)
    return calls


def test_a_full_pass_records_the_frozen_states_and_prefill_computes_only_the_rest(deep, in_torch_here, monkeypatch):
    texts = [*TEXTS, "a [PAD] token inside a text"]  # the padding token mid-text: its length is still the text's
    assert deep.tokenizer.pad_token_id in deep.preprocess(texts[-1:])["input_ids"][0, 1:-1].tolist()
    with top_layers_view(deep, 2, texts) as computed:  # the frozen layers' own pass, for comparison
        expected = dict(computed.states)
    for entry in cache_dir("embeddings").glob("*frozen-below-2*"):
        entry.unlink()  # so the views below compute (or take) their states again
    seen = [*texts[:2], texts[-1], texts[3]]
    with record_frozen_states(deep, 2) as known:
        encode(deep, seen, layers=True)
    assert len(known) == len(seen) and set(known) <= set(expected)
    for key, state in known.items():
        torch.testing.assert_close(state, expected[key], atol=1e-5, rtol=0)
    encode(deep, texts)
    assert len(known) == len(seen)  # the hooks are gone after the block
    calls = _counting_lower(monkeypatch)
    with top_layers_view(deep, 2, texts, known=known) as view:
        assert sum(calls) == len(texts) - len(seen)  # the texts the pass did not see
        fast = encode(deep, texts).embeddings
        assert view.misses == 0
    np.testing.assert_allclose(fast, encode(deep, texts).embeddings, atol=1e-5)


def test_unsupported_architectures_and_counts_are_refused(deep):
    with pytest.raises(UserError, match="between 1 and 4"):
        split_layer(deep, 5)
    with pytest.raises(UserError, match="between 1 and 4"):
        split_layer(deep, 0)
    mpnet = SimpleNamespace(config=SimpleNamespace(model_type="mpnet"), encoder=deep[0].auto_model.encoder)
    with pytest.raises(UserError, match="BERT-style encoder.*mpnet"):
        split_layer([SimpleNamespace(auto_model=mpnet)], 2)


def test_training_changes_only_the_top_layers_and_the_point_is_the_saved_models(deep_dir, tmp_path, in_torch_here,
                                                                                   monkeypatch):
    cfg = TrainConfig(corpus=str(demo_corpus_path()), model=str(deep_dir), top_layers=2, examples=32, batch_size=16,
                      lr=1e-3)
    before = load_model(str(deep_dir), device="cpu").state_dict()
    calls = _counting_lower(monkeypatch)
    result = run_training(cfg, SilentReporter(), tmp_path)
    assert calls == []  # the before-evaluation's pass gave every frozen state (issue 32: the cold quick point)
    saved = load_model(str(tmp_path / "model"), device="cpu")
    after = saved.state_dict()
    changed = {name for name, value in after.items() if not torch.equal(value, before[name])}
    assert changed and all(".layer.2." in name or ".layer.3." in name for name in changed), sorted(changed)
    assert any(".layer.2." in name for name in changed) and any(".layer.3." in name for name in changed)
    assert result["freeze"]["frozen_params"] > 0 and "frozen_states_s" in result["timings"]
    # the after-evaluation ran top layers on cached states; the saved model runs every layer: the same point
    corpus = load_corpus(str(demo_corpus_path()))
    reference = load_model(str(deep_dir), device="cpu")
    again = evaluate(saved, reference, corpus)
    for key in ("polarity", "similarity", "knn_accuracy"):
        assert again[key] == pytest.approx(result["after"][key], abs=1e-3), key
    assert "all but the top 2 layer(s)" in (tmp_path / "model" / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("value", [-1, 1.5, "nan", "inf", "two", True, 10**9, [2], 5])
def test_bad_top_layers_are_one_line_errors(deep_dir, value):
    with pytest.raises(UserError, match="top_layers") as exc:
        TrainConfig(corpus="x.csv", model=str(deep_dir), top_layers=value)
    assert len(str(exc.value).splitlines()) == 1


def test_top_layers_and_freeze_layers_exclude_each_other(deep_dir):
    with pytest.raises(UserError, match="freeze_layers.*top_layers.*not both"):
        TrainConfig(corpus="x.csv", model=str(deep_dir), top_layers=2, freeze_layers=1)
    assert TrainConfig(corpus="x.csv", model=str(deep_dir), top_layers=4).top_layers == 4


def test_quick_configs_train_the_top_layers_where_the_model_allows(deep_dir, tiny_model_dir):
    base = {"corpus": "x.csv", "recipe": "triplet"}
    assert quick_top_layers(str(deep_dir)) == QUICK_TOP
    assert quick_top_layers(str(tiny_model_dir)) == 0  # 2 layers: nothing would stay frozen
    quick = quick_config({**base, "model": str(deep_dir), "freeze_layers": 1}, 0.3)
    assert quick["top_layers"] == QUICK_TOP and quick["freeze_layers"] == 0 and quick["margin"] == 0.3
    assert quick_text(quick) == f"top-{QUICK_TOP} quick"
    full = quick_config({**base, "model": str(deep_dir)}, 0.3, full=True)
    assert full["top_layers"] == 0 and quick_text(full) == "quick"
    assert quick_text({**quick, "examples": 999}) == ""  # not the quick budget: a normal run


def _run_here(monkeypatch) -> list[str]:
    started: list[str] = []

    def start_here(store, run_id):
        started.append(run_id)
        worker.execute(store, run_id)

    monkeypatch.setattr(launch, "start", start_here)
    monkeypatch.setattr(core.jobs.quick, "QUICK_BUDGET", {**QUICK_BUDGET, "examples": 32})
    return started


def test_a_quick_point_and_its_full_retrain_are_two_labelled_points(deep_dir, monkeypatch, tmp_path):
    started = _run_here(monkeypatch)
    store = RunStore(tmp_path)
    base = {"corpus": str(demo_corpus_path()), "model": str(deep_dir), "recipe": "triplet"}
    quick = quick_run(store, base, 0.2)
    full = quick_run(store, base, 0.2, full=True)
    assert quick != full and started == [quick, full]
    assert quick_run(store, base, 0.2) == quick and quick_run(store, base, 0.2, full=True) == full
    names = {p["run_id"]: p["name"] for p in tradeoff_points(store, load_corpus(str(demo_corpus_path())),
                                                             load_model(str(deep_dir), device="cpu"))}
    assert names[quick].endswith(f"(top-{QUICK_TOP} quick)") and names[full].endswith("(quick)")


def test_cli_quick_prints_the_point_and_its_mode(deep_dir, monkeypatch, tmp_path, capsys):
    started = _run_here(monkeypatch)
    monkeypatch.setenv("CONTRASTLAB_HOME", str(tmp_path))
    argv = ["quick", str(demo_corpus_path()), "--model", str(deep_dir), "--margin", "0.4", "--json"]
    assert cli.main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert set(first) >= {"run_id", "seconds", "mode", "before", "after"}
    assert first["mode"] == f"top-{QUICK_TOP} quick, new worker" and first["seconds"] > 0
    assert first["after"]["polarity"] != first["before"]["polarity"] or first["after"] != first["before"]
    assert cli.main(argv) == 0  # the same point again: found, not trained
    second = json.loads(capsys.readouterr().out)
    assert second["run_id"] == first["run_id"] and second["mode"].endswith("existing run") and len(started) == 1


@pytest.mark.parametrize("margin", ["nan", "-1", "inf", "abc", "", "1e400"])
def test_cli_quick_bad_margins_exit_2(margin, capsys):
    assert cli.main(["quick", str(demo_corpus_path()), "--margin", margin]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: margin") and len(err.strip().splitlines()) == 1


def test_cli_quick_bad_corpus_exits_2(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    for corpus in (empty, tmp_path / "missing.csv"):
        assert cli.main(["quick", str(corpus), "--margin", "0.1"]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_tradeoff_page_marks_a_top2_point_and_retrains_it_fully(deep_dir, monkeypatch):
    from tests.test_pages_tradeoff_attention import charts, ok, page

    monkeypatch.setenv("CONTRASTLAB_MODEL", str(deep_dir))
    _run_here(monkeypatch)
    at = ok(page("5_Trade-off.py").run())
    at.select_slider(key="tradeoff_margin").set_value(1.0).run()
    next(b for b in ok(at).button if b.key == "quick_train").click().run()
    quick_id = RunStore().list()[0].id
    names = [t["customdata"][0][0] for t in charts(ok(at))[0]["data"] if t.get("customdata")]
    assert f"{quick_id} (top-{QUICK_TOP} quick)" in names
    assert any(f"top-{QUICK_TOP} quick model at margin 1 is on the plot" in c.value for c in at.caption)
    next(b for b in at.button if b.label == "Retrain fully").click().run()
    runs = RunStore().list()
    assert len(runs) == 2 and runs[0].config["top_layers"] == 0 and runs[0].config["margin"] == 1.0
    names = [t["customdata"][i][0] for t in charts(ok(at))[0]["data"] if t.get("customdata")
             for i in range(len(t["customdata"]))]
    assert f"{runs[0].id} (quick)" in names and f"{quick_id} (top-{QUICK_TOP} quick)" in names
    assert not any(b.label == "Retrain fully" for b in at.button)  # the full point exists now
