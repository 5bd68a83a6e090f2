"""Which layers changed (docs/definitions.md, Which layers changed (CKA); Layer-wise kNN): linear CKA's properties,
CKA per layer after a real fine-tuning step, the cosine default of layer-wise kNN, and `layers --compare RUN_ID`."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

import core.evaluation.evaluate as evaluate_module
from core.cli import main
from core.data.corpus import demo_corpus_path, load_corpus
from core.errors import UserError
from core.evaluation.evaluate import EvalSettings, compare_layers, evaluate, evaluate_layers, layer_cka
from core.evaluation.metrics import linear_cka
from core.models.loading import load_model
from core.runs.store import RunStore
from tests.tiny_model import build_tiny_model

ROW_KEYS = {"layer", "knn_accuracy", "knn_accuracy_ci", "knn_accuracy_tuned", "knn_accuracy_tuned_ci", "cka"}


def gram_cka(x: np.ndarray, y: np.ndarray) -> float:
    """The sample-space form, independent of the code's feature-space one: <Kc, Lc>_F / (||Kc||_F ||Lc||_F)."""
    x, y = x - x.mean(0), y - y.mean(0)
    k, l_ = x @ x.T, y @ y.T
    return float((k * l_).sum() / (np.linalg.norm(k) * np.linalg.norm(l_)))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_cka_matches_the_sample_space_formula_is_symmetric_and_in_0_1(rng):
    for d_x, d_y in ((8, 8), (5, 12), (1, 3)):
        x, y = rng.normal(size=(40, d_x)), rng.normal(size=(40, d_y))
        y[:, 0] += 2 * x[:, 0]  # related, so the value is not just the random-feature bias
        value = linear_cka(x, y)
        assert value == pytest.approx(gram_cka(x, y), rel=1e-9)
        assert value == pytest.approx(linear_cka(y, x), rel=1e-12)
        assert 0 <= value <= 1


def test_cka_is_one_for_identical_rotated_scaled_or_shifted_representations(rng):
    x = rng.normal(size=(60, 10))
    rotation, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    assert np.allclose(rotation @ rotation.T, np.eye(10))
    for same in (x, x @ rotation, 3.7 * x, 1e-3 * x @ rotation, x + 5.0):
        assert linear_cka(x, same) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(x.tolist(), x.astype(np.float32)) == pytest.approx(1.0, abs=1e-6)  # lists and float32 too


def test_cka_is_not_invariant_to_anisotropic_scaling(rng):
    x = rng.normal(size=(60, 6))
    stretched = x * np.array([1, 1, 1, 1, 1, 20.0])
    assert linear_cka(x, stretched) < 0.9


@pytest.mark.parametrize("x, y", [
    (np.zeros((5, 3)), np.zeros((4, 3))),  # different texts
    (np.zeros((1, 3)), np.zeros((1, 3))),  # one row has no spread
    (np.zeros((0, 3)), np.zeros((0, 3))),  # empty
])
def test_cka_refuses_mismatched_or_too_few_rows(x, y):
    with pytest.raises(ValueError, match="two or more examples"):
        linear_cka(x, y)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_cka_is_nan_without_spread_or_with_non_finite_values_and_refuses_text(rng):
    x = rng.normal(size=(10, 4))
    assert math.isnan(linear_cka(x, np.ones((10, 4))))  # a constant representation has no variance to compare
    for bad in (np.inf, -np.inf, np.nan):
        broken = x.copy()
        broken[3, 1] = bad
        assert math.isnan(linear_cka(x, broken)), bad  # never a plausible-looking number
    with pytest.raises(ValueError):
        linear_cka([["a", "b"], ["c", "d"]], x[:2, :2])


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(demo_corpus_path())


@pytest.fixture(scope="module")
def tuned_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny model after one real MNRL optimiser step with the embeddings frozen, saved like a run's model."""
    model = load_model(str(tiny_model_dir), "cpu")
    for param in model[0].auto_model.embeddings.parameters():
        param.requires_grad_(False)
    texts = load_corpus(demo_corpus_path()).train_texts[:32]
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=2.0)
    model.train()
    loss = MultipleNegativesRankingLoss(model)([model.preprocess(texts[:16]), model.preprocess(texts[16:])], None)
    loss.backward()
    optimiser.step()
    path = tmp_path_factory.mktemp("tuned") / "model"
    model.save(str(path))
    return path


def test_after_a_fine_tuning_step_the_last_layer_changed_and_the_frozen_embeddings_did_not(tiny_model, tuned_dir,
                                                                                           corpus):
    tuned = load_model(str(tuned_dir), "cpu")
    assert layer_cka(tiny_model, tiny_model, corpus) == pytest.approx([1.0, 1.0, 1.0], abs=1e-9)
    cka = layer_cka(tiny_model, tuned, corpus)
    assert len(cka) == 3  # embeddings + 2 layers
    assert cka[0] == pytest.approx(1.0, abs=1e-9)  # frozen embeddings: the same states
    assert cka[-1] < 1 - 1e-5 and all(0 <= c <= 1 for c in cka)


def test_cka_refuses_models_with_different_layer_counts(tiny_model, corpus, tmp_path):
    one_layer = load_model(str(build_tiny_model(tmp_path / "one", layers=1)), "cpu")
    with pytest.raises(UserError, match="2 and 1 layers"):
        layer_cka(tiny_model, one_layer, corpus)


def test_layerwise_knn_defaults_to_cosine_so_the_last_layer_is_the_models_own_knn(tiny_model, corpus, monkeypatch):
    """The tiny model mean-pools and normalises, so its own (Euclidean) kNN ranks by the last layer's cosine."""
    assert EvalSettings().layer_metric == "cosine" and EvalSettings().knn_metric == "euclidean"
    own = evaluate(tiny_model, tiny_model, corpus)["knn_accuracy"]
    cosine = [row["knn_accuracy"] for row in evaluate_layers(tiny_model, corpus)]
    assert cosine[-1] == own
    rows = evaluate_layers(tiny_model, corpus, EvalSettings(layer_metric="euclidean"))
    euclidean = [row["knn_accuracy"] for row in rows]
    assert len(euclidean) == 3 and all(0 <= a <= 1 for a in euclidean)
    assert euclidean != cosine  # on raw hidden states the option changes the neighbours (here: the last layer's)

    seen = []
    real = evaluate_module.layerwise_knn_accuracy
    monkeypatch.setattr(evaluate_module, "layerwise_knn_accuracy", lambda *a: seen.append(a[-1]) or real(*a))
    evaluate_layers(tiny_model, corpus)
    evaluate_layers(tiny_model, corpus, EvalSettings(layer_metric="euclidean"))
    assert seen == ["cosine", "euclidean"]


def test_compare_layers_puts_both_curves_and_cka_in_one_row_per_layer(tiny_model, tuned_dir, corpus):
    tuned = load_model(str(tuned_dir), "cpu")
    rows = compare_layers(tiny_model, tuned, corpus)
    assert [set(row) for row in rows] == [ROW_KEYS] * 3
    assert [r["knn_accuracy"] for r in rows] == [r["knn_accuracy"] for r in evaluate_layers(tiny_model, corpus)]
    assert [r["knn_accuracy_tuned"] for r in rows] == [r["knn_accuracy"] for r in evaluate_layers(tuned, corpus)]
    assert [r["cka"] for r in rows] == layer_cka(tiny_model, tuned, corpus)


# --- python -m core layers --compare ------------------------------------------------------------------------------
def finished_run(model_dir: Path | None, base: str, status: str = "done") -> str:
    """A run in the store as a finished (or failed / running / queued) training run leaves it."""
    store = RunStore()
    run_id = store.create("train", {"corpus": str(demo_corpus_path()), "model": base, "recipe": "mnrl"})
    if status != "queued":
        store.mark_running(run_id, os.getpid())
    if status == "done":
        store.mark_done(run_id, artefacts={"model": str(model_dir)})
    elif status == "failed":
        store.mark_failed(run_id, "out of memory")
    return run_id


def error_lines(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [line for line in err.strip().splitlines() if "error:" in line]


def test_cli_compare_prints_the_model_the_run_and_a_row_per_layer(tiny_model_dir, tuned_dir, capsys):
    run_id = finished_run(tuned_dir, str(tiny_model_dir))
    # without --model the run's own reference is the baseline
    assert main(["layers", str(demo_corpus_path()), "--compare", run_id, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"model", "run_id", "layers"}
    assert (out["model"], out["run_id"]) == (str(tiny_model_dir), run_id)
    assert [row["layer"] for row in out["layers"]] == [0, 1, 2] and all(set(r) == ROW_KEYS for r in out["layers"])
    assert out["layers"][0]["cka"] == pytest.approx(1.0, abs=1e-9) and out["layers"][-1]["cka"] < 1 - 1e-5

    assert main(["layers", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--compare", run_id]) == 0
    text = capsys.readouterr().out
    assert f"vs run {run_id}" in text and text.count("CKA") == 3


def test_cli_without_compare_keeps_its_shape(tiny_model_dir, capsys):
    assert main(["layers", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"model", "layers"} and all(set(r) == {"layer", "knn_accuracy", "knn_accuracy_ci"}
                                                 for r in out["layers"])


@pytest.mark.parametrize("status", ["failed", "running", "queued"])
def test_cli_compare_with_an_unfinished_run_exits_2_with_one_line(status, tiny_model_dir, capsys):
    run_id = finished_run(None, str(tiny_model_dir), status)
    assert main(["layers", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--compare", run_id]) == 2
    [line] = error_lines(capsys)
    assert line == f"error: Run {run_id} is {status} and has no model to compare; pick a finished training run."


def test_cli_compare_bad_ids_models_and_metrics_exit_2_with_one_line(tiny_model_dir, tuned_dir, tmp_path, capsys):
    corpus = str(demo_corpus_path())
    model = ["--model", str(tiny_model_dir)]
    assert main(["layers", corpus, *model, "--compare", "20990101-000000-000-abcdef"]) == 2
    [line] = error_lines(capsys)
    assert line.startswith("error: No run with id '20990101-000000-000-abcdef'")

    gone = finished_run(tmp_path / "deleted-model", str(tiny_model_dir))
    assert main(["layers", corpus, *model, "--compare", gone]) == 2
    assert len(error_lines(capsys)) == 1

    one_layer = build_tiny_model(tmp_path / "one", layers=1)
    run_id = finished_run(tuned_dir, str(tiny_model_dir))
    assert main(["layers", corpus, "--model", str(one_layer), "--compare", run_id]) == 2
    [line] = error_lines(capsys)
    assert "CKA compares layers of one architecture" in line

    with pytest.raises(SystemExit) as exit_:
        main(["layers", corpus, *model, "--knn-metric", "bogus"])
    assert exit_.value.code == 2
    [line] = error_lines(capsys)
    assert "invalid choice: 'bogus'" in line
