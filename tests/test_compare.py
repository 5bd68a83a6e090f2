"""core.analysis.maps and core.analysis.layers on the demo corpus and the tiny model: map data shapes, the
subsample control, kNN in range, caches that make re-plotting free, neighbour marks, finished-run filtering and
layer curves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import core.analysis.projection
import core.models.encode
from core.analysis import layers, maps, projection
from core.data.corpus import build_corpus, demo_corpus_path, detect_columns
from core.data.table import read_table
from core.evaluation.evaluate import evaluate
from core.evaluation.uncertainty import proportion_ci
from core.models.loading import load_model
from core.runs.labels import run_label, run_reference
from core.runs.store import RunStore

POINTS = 120  # t-SNE stays fast on the 2 test cores
ROWS = 240  # a slice of the demo corpus: encoding it twice per test stays cheap


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compare_home")


@pytest.fixture(autouse=True)
def cache_home(shared_home, monkeypatch) -> None:
    """One cache for the module: each model encodes the corpus once; tests that count projections use
    their own seed, so their maps are new whatever ran before."""
    monkeypatch.setenv("CONTRASTLAB_HOME", str(shared_home))


@pytest.fixture(scope="module")
def corpus():
    path = demo_corpus_path()
    df = read_table(path.read_bytes(), path.name)[0].sample(ROWS, random_state=0)
    return build_corpus(df, detect_columns(df), name="demo slice", drop_duplicates=False)


@pytest.fixture(scope="module")
def tuned(tiny_model_dir):
    """The tiny model with its weights nudged: a different fingerprint and different embeddings."""
    model = load_model(str(tiny_model_dir), device="cpu")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    return model


@pytest.fixture
def spies(monkeypatch) -> dict[str, list]:
    """Count real encoder forward passes and t-SNE fits."""
    calls: dict[str, list] = {"encode": [], "tsne": []}
    for module, name in ((core.models.encode, "encode"), (core.analysis.projection, "tsne")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *a, _real=real, _name=name, **kw: calls[_name].append(1) or _real(*a, **kw))
    return calls


def test_map_data_shapes_subsample_knn_and_caches(tiny_model, tuned, corpus, spies):
    data = maps.map_data(tiny_model, tuned, corpus, "tsne", max_points=POINTS, seed=2)
    assert len(data) == POINTS == len(data.labels) == len(data.split)
    assert data.n_available == maps.available_points(corpus) == ROWS
    assert data.reference.shape == data.tuned.shape == (POINTS, tiny_model.get_embedding_dimension())
    assert data.ref_map.shape == data.tuned_map.shape == (POINTS, 2)
    assert set(data.labels) == set(corpus.classes)  # stratified: every class on the map
    assert {"train", corpus.target_split} == set(data.split)
    assert 0 <= data.ref_knn <= 1 and 0 <= data.tuned_knn <= 1
    assert data.n_test == len(corpus.test_texts)
    assert len(spies["tsne"]) == 2
    encoded = len(spies["encode"])

    again = maps.map_data(tiny_model, tuned, corpus, "tsne", max_points=POINTS, seed=2)
    assert len(spies["encode"]) == encoded and len(spies["tsne"]) == 2  # all from the disk caches
    np.testing.assert_array_equal(again.tuned_map, data.tuned_map)
    assert again.texts == data.texts

    ref_fig, tuned_fig = maps.map_figures(data, "Reference", "Fine-tuned", highlight=3)
    assert ref_fig.layout.title.text.startswith(f"Reference · kNN accuracy {data.ref_knn:.1%}")
    assert "<br><sup>95% CI " in tuned_fig.layout.title.text  # its own line: beside the figure it was cut off
    assert f"all {len(corpus.test_texts)} test texts, k=10</sup>" in tuned_fig.layout.title.text
    low, high = proportion_ci(data.ref_knn, len(corpus.test_texts))  # the figure's own 95% interval
    assert f"95% CI {low:.1%}–{high:.1%}, all " in ref_fig.layout.title.text
    # same colour per label on both maps
    colours = [{t.name: t.marker.color for t in fig.data} for fig in (ref_fig, tuned_fig)]
    assert colours[0] == colours[1]


def test_knn_matches_the_evaluation(tiny_model, corpus):
    """The title's kNN accuracy is the evaluation's, whatever the number of plotted points."""
    data = maps.map_data(tiny_model, None, corpus, "tsne", max_points=POINTS)
    assert data.ref_knn == pytest.approx(evaluate(tiny_model, tiny_model, corpus, maps.SETTINGS)["knn_accuracy"])


def fake_umap(emb, init=None, seed=0, progress=None):
    """Stands in for UMAP, whose numba compilation alone takes ~20 s; the dispatch and caching are ours."""
    return np.random.default_rng(seed).normal(size=(len(emb), 2)) if init is None else init + 0.1


@pytest.mark.parametrize("method", ["tsne", "umap"])
def test_reference_map_alone_is_reused_by_the_aligned_maps(method, tiny_model, tuned, corpus, monkeypatch):
    name = "tsne" if method == "tsne" else "umap_2d"
    real, calls = core.analysis.projection.tsne if method == "tsne" else fake_umap, []
    monkeypatch.setattr(core.analysis.projection, name, lambda *a, **kw: calls.append(1) or real(*a, **kw))

    alone = maps.map_data(tiny_model, None, corpus, method, max_points=POINTS, seed=1)
    assert alone.tuned is None and alone.tuned_map is None and alone.tuned_knn is None
    assert maps.map_figures(alone, "Reference")[1] is None
    assert len(calls) == 1

    both = maps.map_data(tiny_model, tuned, corpus, method, max_points=POINTS, seed=1)
    assert len(calls) == 2  # only the fine-tuned map was new
    np.testing.assert_array_equal(both.ref_map, alone.ref_map)


def test_neighbours_are_marked_kept_new_or_lost(tiny_model, tuned, corpus):
    data = maps.map_data(tiny_model, tuned, corpus, "tsne", max_points=POINTS)
    found = maps.neighbours(data, 0, k=8)
    assert len(found.reference) == len(found.tuned) == 8
    assert set(found.reference["status"]) <= {"kept", "lost"} and set(found.tuned["status"]) <= {"kept", "new"}
    kept = (found.tuned["status"] == "kept").sum()
    assert kept == (found.reference["status"] == "kept").sum() and found.overlap == pytest.approx(kept / 8)
    assert found.tuned["cosine"].is_monotonic_decreasing
    assert found.reference["text"].isin(data.texts).all()

    with pytest.raises(ValueError):
        maps.neighbours(maps.map_data(tiny_model, None, corpus, "tsne", max_points=POINTS), 0)


def test_finished_runs_only_done_train_runs_of_this_corpus(corpus, tmp_path):
    store = RunStore(tmp_path / "runs")
    model_dir = tmp_path / "model"
    model_dir.mkdir()

    def make(status: str = "done", fingerprint: str = corpus.fingerprint, model: Path | None = model_dir,
             kind: str = "train") -> str:
        run_id = store.create(kind, {"model": "base", "recipe": "triplet", "margin": 0.5})
        store.mark_running(run_id, 1)
        store.set_progress(run_id, summary={"corpus": {"fingerprint": fingerprint}})
        if status == "done":
            store.mark_done(run_id, {}, {"model": str(model)} if model else {})
        else:
            store.mark_failed(run_id, "boom")
        return run_id

    older, newer = make(), make()
    make(status="failed")
    make(fingerprint="another-corpus")
    make(model=tmp_path / "deleted-model")
    make(model=None)
    make(kind="sweep")
    runs = store.finished(corpus.fingerprint)
    assert [r.id for r in runs] == [newer, older]
    assert run_label(runs[0]) == f"triplet · margin 0.5 · {newer}"
    assert run_reference(runs[0]) == "base"


def test_layer_curves_one_pass_cached_and_frozen_shading(tiny_model, tuned, corpus, spies):
    curves = layers.layer_curves({"reference": tiny_model, "tuned": tuned}, corpus)
    n_layers = tiny_model[0].auto_model.config.num_hidden_layers + 1
    assert {k: len(v) for k, v in curves.items()} == {"reference": n_layers, "tuned": n_layers}
    assert all(0 <= a <= 1 for accs in curves.values() for a in accs)
    assert len(spies["encode"]) == 4  # one pass per split and model, all layers at once
    layers.layer_curves({"reference": tiny_model}, corpus)
    assert len(spies["encode"]) == 4

    class FakeRun:
        def __init__(self, run_id: str, layers: int, embeddings: bool) -> None:
            self.id, self.config = run_id, {"freeze_layers": layers, "freeze_embeddings": embeddings}

    one = layers.layers_figure(curves, [FakeRun("a", 1, True), FakeRun("b", 0, False)])
    assert [(s.x0, s.x1) for s in one.layout.shapes] == [(-0.5, 1.5)]
    two = layers.layers_figure(curves, [FakeRun("a", 1, False), FakeRun("b", 2, False)])
    assert sorted((s.x0, s.x1) for s in two.layout.shapes) == [(0.5, 1.5), (0.5, 2.5)]
    assert {a.text for a in two.layout.annotations} == {"frozen in a", "frozen in b"}
    assert not layers.layers_figure(curves, []).layout.shapes


def test_map_data_reports_each_maps_iterations_only_when_it_computes_them(tiny_model, tuned, corpus):
    """The Maps page's progress bar follows openTSNE's iterations: the reference map's full schedule, then the
    fine-tuned map's short one from the reference layout; a second call reads both from the cache."""
    seen: dict[str, list[tuple[int, int]]] = {}
    maps.map_data(tiny_model, tuned, corpus, "tsne", max_points=POINTS, seed=5,
                  progress=lambda label, done, total: seen.setdefault(label, []).append((done, total)))
    iterations = {label: counts for label, counts in seen.items() if "(iterations)" in label}
    reference, aligned = (counts for label, counts in sorted(iterations.items(), key=lambda kv: "fine" in kv[0]))
    assert reference[-1] == (projection.FULL_EARLY_ITERS + projection.FULL_ITERS,) * 2
    assert aligned[-1] == (projection.ALIGNED_ITERS,) * 2
    assert all(a[0] < b[0] for a, b in zip(reference, reference[1:]))
    seen.clear()
    maps.map_data(tiny_model, tuned, corpus, "tsne", max_points=POINTS, seed=5,
                  progress=lambda label, done, total: seen.setdefault(label, []).append((done, total)))
    assert not any("(iterations)" in label for label in seen)
