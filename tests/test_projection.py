"""2-D maps (docs/definitions.md, Aligned maps): shapes, determinism, aligned initialisation, subsampling, cache, and
the neighbour comparison behind a selected point. Small synthetic clusters keep every fit under a second."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial import procrustes

from core.analysis import projection
from core.analysis.projection import (
    aligned_maps,
    cached_projection,
    effective_perplexity,
    map_knn_accuracy,
    neighbour_changes,
    neighbours_kept,
    subsample,
    tsne,
    umap_2d,
)
from core.errors import UserError
from core.storage import array_fingerprint, cache_dir

ROOT = Path(__file__).resolve().parents[1]


def _clusters(n_per: int = 40, n_classes: int = 3, dim: int = 24, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim)) * 3
    labels = np.repeat(np.arange(n_classes), n_per)
    return (centres[labels] + rng.normal(size=(len(labels), dim))).astype(np.float32), labels


def _displacement(a: np.ndarray, b: np.ndarray) -> float:
    """Mean point displacement relative to the map's spread (rms distance from its centre)."""
    spread = np.sqrt(((a - a.mean(0)) ** 2).sum(1).mean())
    return float(np.linalg.norm(a - b, axis=1).mean() / spread)


@pytest.fixture(scope="module")
def data():
    return _clusters()


@pytest.fixture(scope="module")
def ref_map(data):
    return tsne(data[0])


def test_tsne_shape_and_determinism(data, ref_map):
    assert ref_map.shape == (len(data[0]), 2)
    assert np.isfinite(ref_map).all()
    np.testing.assert_array_equal(ref_map, tsne(data[0]))


def test_tsne_aligned_with_identical_embeddings_stays_put(data, ref_map):
    ref, tuned = aligned_maps(data[0], data[0], "tsne", cache=False)
    np.testing.assert_array_equal(ref, ref_map)
    assert _displacement(ref, tuned) < 0.3
    assert procrustes(ref, tuned)[2] < 0.05
    assert abs(tuned.std() / ref.std() - 1) < 0.3  # same scale, so the maps read side by side


def test_tsne_aligned_keeps_the_reference_neighbourhoods(data, ref_map):
    # Unmoved points keep their map neighbours: the short schedule starts from the reference layout.
    aligned = tsne(data[0], init=ref_map)
    assert neighbours_kept(ref_map, aligned) > 0.75  # a random start keeps ~0.68 here, the reference start ~0.79
    # A fresh map of the same embeddings (another seed, PCA start) agrees far less on the neighbours.
    assert neighbours_kept(ref_map, tsne(data[0], seed=1)) < neighbours_kept(ref_map, aligned)
    assert map_knn_accuracy(aligned, data[1]) > 0.9


def test_tsne_progress_counts_up_to_the_schedule(data, ref_map):
    full, aligned = [], []
    tsne(data[0], progress=lambda done, total: full.append((done, total)))
    tsne(data[0], init=ref_map, progress=lambda done, total: aligned.append((done, total)))
    for calls, total in ((full, projection.FULL_EARLY_ITERS + projection.FULL_ITERS),
                         (aligned, projection.ALIGNED_ITERS)):  # no early exaggeration from a reference layout
        done = [d for d, _ in calls]
        assert len(calls) > 1 and all(b > a for a, b in zip(done, done[1:]))
        assert {t for _, t in calls} == {total} and done[-1] == total


def test_tsne_aligned_is_deterministic_with_a_seed(data, ref_map):
    shifted = data[0] + np.random.default_rng(1).normal(scale=0.5, size=data[0].shape).astype(np.float32)
    first = tsne(shifted, init=ref_map, seed=3)
    np.testing.assert_array_equal(first, tsne(shifted, init=ref_map, seed=3))
    # The progress callback only observes: the map is the same with or without it.
    np.testing.assert_array_equal(first, tsne(shifted, init=ref_map, seed=3, progress=lambda d, t: None))


def test_neighbours_kept_and_map_knn_accuracy_on_constructed_maps():
    # Two runs of six points along a line, far apart.
    line = np.stack([np.r_[np.arange(6.0), np.arange(6.0) + 100], np.zeros(12)], 1)
    assert neighbours_kept(line, line * 5 + 3, k=2) == 1.0  # scale and shift keep every neighbour
    shuffled = line[np.random.default_rng(0).permutation(12)]
    assert neighbours_kept(line, shuffled, k=2) < 0.5
    assert map_knn_accuracy(line, ["a"] * 6 + ["b"] * 6, k=2) == 1.0
    # Alternating labels: each point's nearest neighbour has the other label and breaks every 1-1 tie.
    assert map_knn_accuracy(line, ["a", "b"] * 6, k=2) == 0.0


def test_tsne_follows_the_given_init_orientation(data, ref_map):
    # A mirrored start gives a mirrored map: the layout comes from the init, not from PCA.
    mirrored = ref_map[:, ::-1].copy()
    out = tsne(data[0], init=mirrored)
    assert _displacement(mirrored, out) < 0.3
    assert _displacement(ref_map, out) > 0.5


def test_tsne_small_corpus_gets_a_smaller_perplexity():
    x, _ = _clusters(n_per=10)
    assert effective_perplexity(30, 30) < 10
    assert tsne(x).shape == (30, 2)
    with pytest.raises(UserError):
        tsne(x[:4])
    with pytest.raises(ValueError):
        tsne(x, init=np.zeros((29, 2)))


def test_umap_shape_determinism_and_init():
    x, _ = _clusters(n_per=30)
    first = umap_2d(x)
    assert first.shape == (90, 2) and np.isfinite(first).all()
    np.testing.assert_array_equal(first, umap_2d(x))
    # UMAP takes the reference map as its start; unlike t-SNE it keeps no guarantee about where separate
    # clusters drift, so only reproducibility is asserted here.
    ref, tuned = aligned_maps(x, x, "umap", cache=False)
    assert tuned.shape == (90, 2) and np.isfinite(tuned).all()
    np.testing.assert_array_equal(tuned, umap_2d(x, init=ref))
    assert umap_2d(x[:12]).shape == (12, 2)  # n_neighbors capped below the corpus size


def test_aligned_maps_cache_keys(monkeypatch):
    calls = []

    def fake(method, emb, init, seed, params, progress=None):
        calls.append(init is None)
        return emb[:, :2] + (0 if init is None else init)

    monkeypatch.setattr(projection, "project", fake)
    ref, _ = _clusters(n_per=5)
    tuned = ref.copy()
    a = aligned_maps(ref, tuned + 1)
    b = aligned_maps(ref, tuned + 1)
    assert calls == [True, False]  # second call read both maps from disk
    np.testing.assert_array_equal(a[1], b[1])
    aligned_maps(ref, tuned + 2)  # new fine-tuned model: reference map reused, tuned map recomputed
    aligned_maps(ref, tuned + 1, seed=1)
    aligned_maps(ref, tuned + 1, params={"perplexity": 5})
    assert calls == [True, False, False, True, False, True, False]
    # Another aligned schedule recomputes the fine-tuned map only; UMAP's maps do not depend on it.
    monkeypatch.setattr(projection, "ALIGNED_ITERS", projection.ALIGNED_ITERS + projection.PROGRESS_EVERY)
    aligned_maps(ref, tuned + 1)
    aligned_maps(ref, tuned + 1, "umap")
    aligned_maps(ref, tuned + 1, "umap")
    assert calls[7:] == [False, True, False]
    with pytest.raises(ValueError):
        aligned_maps(ref, tuned, "pca")


def test_cached_projection_hits_without_recomputing():
    calls = []

    def compute():
        if calls:
            raise AssertionError("recomputed despite a cache entry")
        calls.append(1)
        return np.arange(6, dtype=np.float32).reshape(3, 2)

    key = ("tsne", array_fingerprint(np.ones((3, 4))), {"perplexity": 30}, 0)
    first = cached_projection(key, compute)
    second = cached_projection(key, compute)
    np.testing.assert_array_equal(first, second)
    assert len(list(cache_dir("projections").glob("*.npy"))) == 1
    assert not list(cache_dir("projections").glob("*.tmp*"))
    # A different array content, even of the same shape, is a different key.
    other = ("tsne", array_fingerprint(np.zeros((3, 4))), {"perplexity": 30}, 0)
    assert cached_projection(other, lambda: np.zeros((3, 2))).sum() == 0


def test_cached_projection_recovers_from_a_corrupt_entry():
    key = ("umap", "abc")
    cached_projection(key, lambda: np.ones((2, 2)))
    (path,) = cache_dir("projections").glob("*.npy")
    path.write_bytes(b"not a numpy file")
    np.testing.assert_array_equal(cached_projection(key, lambda: np.zeros((2, 2))), np.zeros((2, 2)))


def test_subsample_is_stratified_and_deterministic():
    labels = np.array(["a"] * 700 + ["b"] * 290 + ["rare"] * 10)
    idx = subsample(1000, 100, labels, seed=0)
    assert len(idx) == 100 and len(set(idx)) == 100 and np.all(np.diff(idx) > 0)
    counts = {c: int((labels[idx] == c).sum()) for c in ("a", "b", "rare")}
    assert counts == {"a": 70, "b": 29, "rare": 1}
    np.testing.assert_array_equal(idx, subsample(1000, 100, labels, seed=0))
    assert not np.array_equal(idx, subsample(1000, 100, labels, seed=1))
    np.testing.assert_array_equal(subsample(50, 100, labels[:50]), np.arange(50))


def test_subsample_keeps_every_class_and_the_budget():
    labels = [0] * 97 + [1, 2, 3]
    idx = subsample(100, 5, labels)
    assert len(idx) == 5 and {labels[i] for i in idx} == {0, 1, 2, 3}
    assert len(subsample(100, 2, labels)) == 2
    with pytest.raises(ValueError):
        subsample(100, 5, labels[:10])


def test_neighbour_changes_on_a_constructed_example():
    # Point 0 sits at angle 0; reference neighbours are 1, 2 (close angles), then 3, 4 far away.
    # In the fine-tuned model 1 moves away and 4 moves in: kept 2, new 4, lost 1.
    angles_ref = np.array([0.0, 0.1, 0.2, 1.0, 1.5, 3.0])
    angles_tuned = np.array([0.0, 2.0, 0.2, 1.0, 0.1, 3.0])
    unit = lambda a: np.stack([np.cos(a), np.sin(a)], 1) * 5  # noqa: E731 - scale must not matter (cosine)
    out = neighbour_changes(unit(angles_ref), unit(angles_tuned), index=0, k=2)
    assert out["ref"] == [1, 2] and out["tuned"] == [4, 2]
    assert out["kept"] == [2] and out["new"] == [4] and out["lost"] == [1]
    assert out["overlap"] == 0.5
    assert out["ref_scores"][0] == pytest.approx(np.cos(0.1), abs=1e-5)
    full = neighbour_changes(unit(angles_ref), unit(angles_ref), index=5, k=10)
    assert len(full["ref"]) == 5 and 5 not in full["ref"] and full["new"] == full["lost"] == []
    with pytest.raises(IndexError):
        neighbour_changes(unit(angles_ref), unit(angles_tuned), index=6)


def test_affinities_are_openTSNE_exact_neighbour_affinities(data):
    from openTSNE.affinity import PerplexityBasedNN

    x = data[0] / np.linalg.norm(data[0], axis=1, keepdims=True)
    ours = projection.affinities(x, 10).P
    theirs = PerplexityBasedNN(x, 10, method="exact").P  # openTSNE's own exact (scikit-learn) neighbour search
    assert ours.nnz == theirs.nnz and abs(ours - theirs).max() < 1e-6


def test_affinities_and_tsne_with_more_duplicates_than_neighbours():
    # Every text 40 times and only 15 neighbours searched: a point can be missing from its own search result.
    x, labels = _clusters(n_per=4)
    x = np.repeat(x / np.linalg.norm(x, axis=1, keepdims=True), 40, axis=0)
    P = projection.affinities(x, 5).P
    assert P.shape == (480, 480) and np.isfinite(P.data).all() and P.diagonal().sum() == 0
    assert P.sum() == pytest.approx(1.0)
    out = tsne(x)
    assert out.shape == (480, 2) and np.isfinite(out).all()


def test_tsne_gradient_method_and_fft_grid_follow_the_map_size(data, monkeypatch):
    import openTSNE

    seen, real = [], openTSNE.TSNE
    monkeypatch.setattr(openTSNE, "TSNE", lambda **kw: seen.append(kw) or real(**kw))
    # A shorter schedule (both phases kept) for every map here: a map this small keeps the FFT grid at its fixed floor,
    # ~10 ms an iteration whatever the points, so the full 750 took ~7 s a map; the method and grid do not depend on it.
    monkeypatch.setattr(projection, "FULL_EARLY_ITERS", 100)
    monkeypatch.setattr(projection, "FULL_ITERS", 200)
    small = tsne(data[0])
    monkeypatch.setattr(projection, "FFT_FROM", len(data[0]))  # as if this map were 5,000 points
    fft = tsne(data[0])
    assert [kw["negative_gradient_method"] for kw in seen] == ["bh", "fft"]
    assert seen[1]["ints_in_interval"] == projection.INTS_IN_INTERVAL == 2
    np.testing.assert_array_equal(fft, tsne(data[0]))  # deterministic on the FFT path too
    for out in (small, fft):
        assert map_knn_accuracy(out, data[1]) > 0.9 and neighbours_kept(small, out) > 0.5


def test_umap_compiles_into_the_numba_cache_once_per_machine():
    # Fuzzy graph and layout functions, which umap-learn does not cache itself, are compiled into the cache folder;
    # of the serial and parallel layout epoch (one Python function, one cache entry) only the serial one caches.
    import numba
    import umap.layouts
    import umap.umap_

    umap_2d(_clusters(n_per=30)[0])
    cache = Path(numba.config.CACHE_DIR)
    layouts = umap.layouts
    for fn in (umap.umap_.smooth_knn_dist, umap.umap_.compute_membership_strengths,
               layouts._nb_optimize_layout_euclidean_single_epoch):
        assert fn.signatures and Path(fn.stats.cache_path).is_relative_to(cache), fn
    assert layouts._nb_optimize_layout_euclidean_single_epoch_parallel.stats.cache_path is None
    assert list(cache.rglob("umap_.smooth_knn_dist-*.nbi")) and list(cache.rglob("*.nbc"))


UMAP_IN_A_FRESH_PROCESS = """
import json, numpy as np, umap.layouts, umap.umap_
from core.analysis.projection import umap_2d
out = umap_2d(np.random.default_rng(0).normal(size=(60, 8)).astype(np.float32))
fns = [umap.umap_.smooth_knn_dist, umap.umap_.compute_membership_strengths,
       umap.layouts._nb_optimize_layout_euclidean_single_epoch]
print(json.dumps({"hits": sum(sum(f.stats.cache_hits.values()) for f in fns),
                  "misses": sum(sum(f.stats.cache_misses.values()) for f in fns), "map": out.tolist()}))
"""


@pytest.mark.slow
def test_umap_second_process_loads_every_compiled_function_from_the_cache(tmp_path):
    # Two fresh processes sharing one ContrastLab home: the first compiles, the second only loads (~30 s in all).
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {"CONTRASTLAB_HOME": str(tmp_path)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", UMAP_IN_A_FRESH_PROCESS], env=env, cwd=ROOT,
                                      check=True, capture_output=True, text=True).stdout) for _ in range(2)]
    assert runs[0]["misses"] > 0 and runs[0]["hits"] == 0
    assert runs[1]["misses"] == 0 and runs[1]["hits"] >= 3
    assert runs[0]["map"] == runs[1]["map"]  # a cached compilation draws the same map
    assert (tmp_path / "cache" / "numba").is_dir()
