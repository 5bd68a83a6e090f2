"""2-D maps of embeddings (docs/definitions.md, Aligned maps): t-SNE (openTSNE) and UMAP, aligned so the reference and
fine-tuned maps can be read side by side, cached on disk so re-plotting never recomputes.

Embeddings are L2-normalised before projecting: sentence embeddings are compared by cosine, and on unit
vectors Euclidean neighbours are cosine neighbours, which every backend (and PCA initialisation) supports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from core.errors import UserError
from core.evaluation.metrics import search
from core.storage import array_fingerprint, cached_array, key_hash, projection_entry

METHODS = ("tsne", "umap")
PARALLEL_ABOVE = 5000
MIN_POINTS = 5  # fewer points give no meaningful neighbourhoods (and break PCA / spectral initialisation)


def _unit(emb: np.ndarray) -> np.ndarray:
    x = np.asarray(emb, dtype=np.float32)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def _check(emb: np.ndarray, init: np.ndarray | None) -> None:
    if emb.ndim != 2 or len(emb) < MIN_POINTS:
        raise UserError(f"A map needs at least {MIN_POINTS} texts; got {len(emb)}. Use a larger corpus or split.")
    if init is not None and np.shape(init) != (len(emb), 2):
        raise ValueError(f"init must have shape ({len(emb)}, 2), got {np.shape(init)}")


def effective_perplexity(n: int, perplexity: float) -> float:
    """openTSNE looks at 3 x perplexity neighbours; cap it so a small corpus (e.g. 30 texts) still works."""
    return float(max(1.0, min(perplexity, (n - 1) / 3)))


def tsne(
    emb: np.ndarray,
    init: np.ndarray | None = None,
    seed: int = 0,
    perplexity: float = 30,
    n_jobs: int | None = None,
) -> np.ndarray:
    """openTSNE map (n, 2); PCA initialisation, or `init` (e.g. the reference map) when given.

    openTSNE uses a supplied layout as-is and expects it at std ~1e-4 (as its own PCA initialisation is);
    a full-scale map would start with huge distances and converge poorly. So `init` is rescaled to that
    std with one factor for both axes: the layout and its orientation are kept, so clusters that did not
    move start, and end, where the reference map has them.
    Gradient method "auto": Barnes-Hut below 10k points, FFT-accelerated above (openTSNE's own choice;
    FFT has a fixed grid cost that makes small maps several times slower). n_jobs None: one thread below
    PARALLEL_ABOVE points, where thread start-up costs more than it saves, all cores above.
    """
    from openTSNE import TSNE
    from openTSNE.initialization import rescale

    x = _unit(emb)
    _check(x, init)
    start = "pca" if init is None else rescale(np.asarray(init, dtype=np.float64), target_std=1e-4)
    model = TSNE(
        n_components=2,
        perplexity=effective_perplexity(len(x), perplexity),
        initialization=start,
        negative_gradient_method="auto",
        random_state=seed,
        n_jobs=n_jobs if n_jobs is not None else (1 if len(x) < PARALLEL_ABOVE else -1),
        verbose=False,
    )
    return np.asarray(model.fit(x), dtype=np.float32)


def umap_2d(
    emb: np.ndarray,
    init: np.ndarray | None = None,
    seed: int = 0,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
) -> np.ndarray:
    """UMAP map (n, 2); spectral initialisation, or `init` when given (UMAP rescales it into its own box).

    A fixed random_state makes umap-learn single-threaded, which is what makes the map reproducible.
    """
    import umap

    x = _unit(emb)
    _check(x, init)
    model = umap.UMAP(
        n_components=2,
        n_neighbors=int(min(n_neighbors, len(x) - 1)),
        min_dist=min_dist,
        init="spectral" if init is None else np.asarray(init, dtype=np.float32),
        random_state=seed,
        n_jobs=1,
    )
    return np.asarray(model.fit_transform(x), dtype=np.float32)


def _project(method: str, emb: np.ndarray, init: np.ndarray | None, seed: int, params: dict) -> np.ndarray:
    if method == "tsne":
        return tsne(emb, init=init, seed=seed, **params)
    if method == "umap":
        return umap_2d(emb, init=init, seed=seed, **params)
    raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")


def aligned_maps(
    ref_emb: np.ndarray,
    tuned_emb: np.ndarray,
    method: str = "tsne",
    seed: int = 0,
    params: dict | None = None,
    cache: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(reference map, fine-tuned map started from the reference map), so unmoved points stay put.

    `params` go to tsne() (perplexity) or umap_2d() (n_neighbors, min_dist). Cached by embedding content,
    method, seed and params; the fine-tuned entry is also keyed by the reference entry it started from.
    """
    if method not in METHODS:
        raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")
    if np.shape(ref_emb)[0] != np.shape(tuned_emb)[0]:
        raise ValueError("reference and fine-tuned embeddings must cover the same texts")
    params = dict(params or {})
    if not cache:
        ref_map = _project(method, ref_emb, None, seed, params)
        return ref_map, _project(method, tuned_emb, ref_map, seed, params)
    ref_key = reference_map_key(method, ref_emb, seed, params)
    rows = len(ref_emb)
    ref_map = cached_projection(ref_key, lambda: _project(method, ref_emb, None, seed, params), rows)
    tuned_key = (method, array_fingerprint(tuned_emb), seed, params, "init", key_hash(ref_key))
    return ref_map, cached_projection(tuned_key, lambda: _project(method, tuned_emb, ref_map, seed, params), rows)


def subsample(n: int, max_points: int, labels: Sequence, seed: int = 0) -> np.ndarray:
    """Sorted indices of at most max_points rows, stratified by label, so big corpora stay plottable.

    Each class keeps its share (largest remainder) and at least one point while there is room, so a rare
    class never vanishes from the map. Same inputs and seed give the same indices.
    """
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    labels = np.asarray(labels)
    if len(labels) != n:
        raise ValueError(f"got {len(labels)} labels for {n} rows")
    if n <= max_points:
        return np.arange(n)
    classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    exact = counts * max_points / n
    quota = np.minimum(counts, np.maximum(1, np.floor(exact))).astype(int)
    while quota.sum() > max_points:  # only when the one-per-class floor overflows the budget
        quota[np.argmax(quota)] -= 1
    for c in np.argsort(-(exact - quota), kind="stable"):
        if quota.sum() == max_points:
            break
        quota[c] += min(counts[c] - quota[c], max_points - quota.sum(), 1)
    rng = np.random.default_rng(seed)
    picked = [rng.choice(np.flatnonzero(inverse == c), size=q, replace=False) for c, q in enumerate(quota)]
    return np.sort(np.concatenate(picked))


# --- disk cache ----------------------------------------------------------------------------------------


def reference_map_key(method: str, emb: np.ndarray, seed: int, params: dict) -> tuple:
    """The cache key of a map computed from scratch (no init): aligned_maps' reference map, so a page that
    shows the reference alone computes the very map a later fine-tuned map starts from."""
    return (method, array_fingerprint(emb), seed, params, "init", None)


def cached_projection(key_parts: tuple, compute: Callable[[], np.ndarray], rows: int | None = None) -> np.ndarray:
    """The cached map for this key, or compute() written atomically; a corrupt entry, or one that is not
    (rows, 2), is recomputed."""
    return cached_array(projection_entry(key_parts), compute, (rows, 2))


# --- what moved around a selected point ---------------------------------------------------------------


def neighbour_changes(ref_emb: np.ndarray, tuned_emb: np.ndarray, index: int, k: int = 10) -> dict:
    """Cosine neighbours of one point under both models: which stayed, which are new, which were lost.

    Lists hold row indices, nearest first; the point itself is excluded (a duplicate text is not).
    """
    n = len(ref_emb)
    if not 0 <= index < n:
        raise IndexError(f"point {index} is outside 0..{n - 1}")

    def neighbours(emb: np.ndarray) -> tuple[list[int], list[float]]:
        scores, idx = search(emb[index : index + 1], emb, k + 1, "cosine")
        pairs = [(int(i), float(s)) for i, s in zip(idx[0], scores[0]) if i != index and i >= 0][:k]
        return [i for i, _ in pairs], [s for _, s in pairs]

    ref, ref_scores = neighbours(np.asarray(ref_emb))
    tuned, tuned_scores = neighbours(np.asarray(tuned_emb))
    ref_set, tuned_set = set(ref), set(tuned)
    kept = [i for i in tuned if i in ref_set]
    return {
        "index": index,
        "ref": ref,
        "ref_scores": ref_scores,
        "tuned": tuned,
        "tuned_scores": tuned_scores,
        "kept": kept,
        "new": [i for i in tuned if i not in ref_set],
        "lost": [i for i in ref if i not in tuned_set],
        "overlap": len(kept) / max(len(ref), 1),
    }
