"""2-D maps of embeddings (docs/definitions.md, Aligned maps): t-SNE (openTSNE) and UMAP, aligned so the reference and
fine-tuned maps can be read side by side, cached on disk so re-plotting never recomputes.

Embeddings are L2-normalised before projecting: sentence embeddings are compared by cosine, and on unit
vectors Euclidean neighbours are cosine neighbours, which every backend (and PCA initialisation) supports.
"""

from __future__ import annotations

import io
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from core.errors import UserError
from core.evaluation.metrics import search
from core.storage import array_fingerprint, cache_dir, cached_array, key_hash, projection_entry

METHODS = ("tsne", "umap")
PARALLEL_ABOVE = 5000
FFT_FROM = 5000  # openTSNE's FFT gradient from this many points, Barnes-Hut below (bench/maps.py)
INTS_IN_INTERVAL = 2  # FFT grid: map units per interpolation interval (openTSNE's default 1; bench/maps.py)
MIN_POINTS = 5  # fewer points give no meaningful neighbourhoods (and break PCA / spectral initialisation)
FULL_EARLY_ITERS, FULL_ITERS = 250, 500  # openTSNE's defaults: early exaggeration, then plain iterations
ALIGNED_ITERS = 200  # plain iterations of a map started from the reference map (bench/maps.py)
PROGRESS_EVERY = 25  # iterations between progress reports; every schedule above is a multiple of it
NUMBA_PACKAGES = ("umap", "pynndescent")  # whose numba functions are compiled once per machine (_import_umap)


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


def affinities(x: np.ndarray, perplexity: float, n_jobs: int = 1):
    """t-SNE's input similarities (openTSNE's perplexity-based affinities) of unit vectors `x`, from each point's
    exact 3 x perplexity nearest neighbours found with FAISS (core.evaluation.metrics.search).

    openTSNE would find them itself with Annoy, an approximate index; at 10,000 x 384 that search took 2.5-4x as
    long as FAISS's exact one (bench/maps.py), whose affinities equal openTSNE's own exact search's. `perplexity`
    must already be effective_perplexity().
    """
    from openTSNE.affinity import PerplexityBasedNN
    from openTSNE.nearest_neighbors import PrecomputedNeighbors

    n, k = len(x), min(len(x) - 1, int(3 * perplexity))
    scores, idx = search(x, x, k + 1, "cosine")
    own = idx == np.arange(n)[:, None]
    own[~own.any(axis=1), -1] = True  # over k exact duplicates of a point can crowd it out of its own list
    idx = idx[~own].reshape(n, k)
    dist = np.sqrt(np.clip(2 - 2 * scores[~own].reshape(n, k).astype(np.float64), 0, None))  # |a-b|² = 2-2cos
    return PerplexityBasedNN(knn_index=PrecomputedNeighbors(idx, dist), perplexity=perplexity, n_jobs=n_jobs)


def tsne(
    emb: np.ndarray,
    init: np.ndarray | None = None,
    seed: int = 0,
    perplexity: float = 30,
    n_jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """openTSNE map (n, 2); PCA initialisation and openTSNE's full schedule, or, given `init` (e.g. the
    reference map), a short schedule from that layout.

    openTSNE uses a supplied layout as-is and expects it at std ~1e-4 (as its own PCA initialisation is);
    a full-scale map would start with huge distances and converge poorly. So `init` is rescaled to that
    std with one factor for both axes: the layout and its orientation are kept, so clusters that did not
    move start, and end, where the reference map has them. Early exaggeration exists to untangle a random
    or PCA start into clusters; a reference layout already has them, so an aligned map skips it and runs
    ALIGNED_ITERS plain iterations (bench/maps.py measures what that keeps against the full schedule).

    Where the time goes at 10,000 points (bench/maps.py, 2 cores): openTSNE's defaults spend it on Annoy's
    neighbour search and, mostly, on the FFT gradient's interpolation grid, which has one interval (3 points) per
    map unit in each direction and so grows with the square of the map's extent as the clusters spread: ~500 x 500
    points by the last iterations, while early exaggeration stays at the 150 x 150 floor. So the affinities come
    from FAISS's exact neighbours (affinities()) and the grid has an interval per INTS_IN_INTERVAL = 2 map units, a
    quarter of the points: both maps together are several times faster than before (docs/definitions.md, Aligned
    maps, has the figures). The map's kNN accuracy and share of each text's 10 nearest neighbours stay as with the
    default grid; its exact KL divergence rises ~3% (still below openTSNE's defaults', whose Annoy neighbours cost
    more). The schedule (250 exaggerated + 500 plain iterations) stays openTSNE's: cutting plain iterations saved
    less time per lost quality than the coarser grid.
    FFT from FFT_FROM points, Barnes-Hut below (the grid's fixed cost makes small maps slower: at 5,000 points FFT
    took 0.4x Barnes-Hut's time, at 2,000 1.3x). n_jobs None: one thread below PARALLEL_ABOVE points, where thread
    start-up costs more than it saves, all cores above.
    `progress(done, total)` is called with 0 before the neighbour search (so a page can name that step), then with
    the iterations done every PROGRESS_EVERY iterations, last with total.
    """
    from openTSNE import TSNE
    from openTSNE.initialization import rescale

    x = _unit(emb)
    _check(x, init)
    if init is None:
        start, early, plain = "pca", FULL_EARLY_ITERS, FULL_ITERS
    else:
        start = rescale(np.asarray(init, dtype=np.float64), target_std=1e-4)
        early, plain = 0, ALIGNED_ITERS
    total = early + plain
    jobs = n_jobs if n_jobs is not None else (1 if len(x) < PARALLEL_ABOVE else -1)
    perplexity = effective_perplexity(len(x), perplexity)
    done = [0]
    if progress:
        progress(0, total)

    def report(iteration: int, error: float, embedding: np.ndarray) -> bool:
        # openTSNE restarts its iteration count in each phase; both phases are multiples of PROGRESS_EVERY,
        # so counting calls gives the iterations done across phases.
        done[0] += PROGRESS_EVERY
        progress(done[0], total)
        return False

    model = TSNE(
        n_components=2,
        perplexity=perplexity,
        initialization=start,
        early_exaggeration_iter=early,
        n_iter=plain,
        negative_gradient_method="fft" if len(x) >= FFT_FROM else "bh",
        ints_in_interval=INTS_IN_INTERVAL,
        random_state=seed,
        n_jobs=jobs,
        callbacks=report if progress else None,
        callbacks_every_iters=PROGRESS_EVERY,
        verbose=False,
    )
    return np.asarray(model.fit(x, affinities=affinities(x, perplexity, jobs)), dtype=np.float32)


def umap_epochs(n: int) -> int:
    """umap-learn's own default number of layout epochs for n points (500 up to 10,000, 200 above), passed explicitly
    so a progress bar knows the total before the first epoch; the map is the one the default gives."""
    return 500 if n <= 10_000 else 200


class _EpochRelay(io.TextIOBase):
    """The "file" umap-learn's tqdm bar writes to: its only progress hook (umap-learn has no callback), read back as
    (epochs done, total) from the bar format "{n}/{total}"."""

    def __init__(self, progress: Callable[[int, int], None]) -> None:
        super().__init__()
        self._progress = progress

    def write(self, text: str) -> int:
        for done, total in re.findall(r"(\d+)/(\d+)", text):
            self._progress(int(done), int(total))
        return len(text)


def umap_2d(
    emb: np.ndarray,
    init: np.ndarray | None = None,
    seed: int = 0,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """UMAP map (n, 2); spectral initialisation, or `init` when given (UMAP rescales it into its own box).

    A fixed random_state makes umap-learn single-threaded, which is what makes the map reproducible.
    `progress(done, total)` gets the layout epochs: 0 before the neighbour graph and initial layout are built (which
    report nothing), then as umap-learn's epoch bar moves.
    """
    epochs = umap_epochs(len(emb))
    if progress:  # before the import too: loading umap-learn's compiled functions takes seconds
        progress(0, epochs)
    umap = _import_umap()
    x = _unit(emb)
    _check(x, init)
    bar = {"disable": False, "file": _EpochRelay(progress), "bar_format": "{n}/{total}", "mininterval": 0.2} \
        if progress else None
    model = umap.UMAP(
        n_components=2,
        n_neighbors=int(min(n_neighbors, len(x) - 1)),
        min_dist=min_dist,
        init="spectral" if init is None else np.asarray(init, dtype=np.float32),
        n_epochs=epochs,
        random_state=seed,
        n_jobs=1,
        tqdm_kwds=bar,
    )
    return np.asarray(model.fit_transform(x), dtype=np.float32)


def _import_umap():
    """umap-learn, with its numba functions compiled once per machine instead of once per process.

    numba compiles a function at its first call in each process and keeps the result on disk only for functions
    declared `cache=True`: pynndescent declares most of its own so, umap-learn only `rdist`, so its fuzzy graph and
    layout functions were compiled again in every new server or CLI process (bench/maps.py times it). Caching is
    switched on for every numba function of NUMBA_PACKAGES before its first call. numba keys a cache entry by the
    function's code and argument types, not by its options, so where two functions share one Python function (umap's
    serial and parallel layout epoch) only the serial one, the one a seeded map runs, is cached. The cache lives in
    the ContrastLab home (cache/numba) unless NUMBA_CACHE_DIR names another folder; numba checks each entry against
    its source file, so an upgraded umap-learn recompiles.
    """
    import numba

    if not numba.config.CACHE_DIR:  # NUMBA_CACHE_DIR unset; set before pynndescent's import picks its cache folder
        numba.config.CACHE_DIR = str(cache_dir("numba"))
    import umap
    from numba.core.dispatcher import Dispatcher

    by_function: dict[object, dict[int, Dispatcher]] = defaultdict(dict)
    for name, module in list(sys.modules.items()):
        if module is not None and name.split(".")[0] in NUMBA_PACKAGES:
            for value in vars(module).values():
                if isinstance(value, Dispatcher):
                    by_function[value.py_func][id(value)] = value
    for twins in by_function.values():
        serial = [d for d in twins.values() if not d.targetoptions.get("parallel")]
        for dispatcher in twins.values() if len(twins) == 1 else serial[:1] if len(serial) == 1 else []:
            if dispatcher.stats.cache_path is None:
                dispatcher.enable_caching()
    return umap


Progress = Callable[[int, int], None]  # (iterations or epochs done, total), first (0, total) before they start


def project(method: str, emb: np.ndarray, init: np.ndarray | None, seed: int, params: dict,
            progress: Progress | None = None) -> np.ndarray:
    """One map by `method`, uncached: tsne() or umap_2d() with `params`."""
    if method == "tsne":
        return tsne(emb, init=init, seed=seed, progress=progress, **params)
    if method == "umap":
        return umap_2d(emb, init=init, seed=seed, progress=progress, **params)
    raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")


def aligned_maps(
    ref_emb: np.ndarray,
    tuned_emb: np.ndarray,
    method: str = "tsne",
    seed: int = 0,
    params: dict | None = None,
    cache: bool = True,
    progress: tuple[Progress | None, Progress | None] = (None, None),
) -> tuple[np.ndarray, np.ndarray]:
    """(reference map, fine-tuned map started from the reference map), so unmoved points stay put. `progress`:
    one callback per map (called only for a map that is computed, not read from the cache).

    `params` go to tsne() (perplexity) or umap_2d() (n_neighbors, min_dist). Cached by embedding content,
    method, seed and params; the fine-tuned entry is also keyed by the reference entry it started from and,
    for t-SNE, by the aligned schedule (ALIGNED_ITERS).
    """
    if method not in METHODS:
        raise ValueError(f"unknown projection method {method!r}; choose one of {METHODS}")
    if np.shape(ref_emb)[0] != np.shape(tuned_emb)[0]:
        raise ValueError("reference and fine-tuned embeddings must cover the same texts")
    params = dict(params or {})
    ref_progress, tuned_progress = progress
    if not cache:
        ref_map = project(method, ref_emb, None, seed, params, ref_progress)
        return ref_map, project(method, tuned_emb, ref_map, seed, params, tuned_progress)
    ref_key = reference_map_key(method, ref_emb, seed, params)
    rows = len(ref_emb)
    ref_map = cached_projection(ref_key, lambda: project(method, ref_emb, None, seed, params, ref_progress), rows)
    # The aligned t-SNE schedule is part of the key, so a map cached under another schedule is recomputed.
    schedule = ALIGNED_ITERS if method == "tsne" else None
    tuned_key = (method, array_fingerprint(tuned_emb), seed, params, "init", key_hash(ref_key), schedule)
    return ref_map, cached_projection(
        tuned_key, lambda: project(method, tuned_emb, ref_map, seed, params, tuned_progress), rows)


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


def neighbourhood_change(ref_emb: np.ndarray, tuned_emb: np.ndarray, k: int = 10) -> np.ndarray:
    """Per point, the share of its k cosine nearest neighbours under the reference embedding that are no longer among
    its k nearest under the fine-tuned one (0 = same neighbourhood, 1 = all new): neighbour_changes for every point
    at once, 1 - its overlap. Measured on the embeddings, not on a 2-D map, whose distances t-SNE and UMAP distort."""
    n = len(ref_emb)
    if len(tuned_emb) != n:
        raise ValueError("reference and fine-tuned embeddings must cover the same texts")
    k = min(k, n - 1)
    if k < 1:
        return np.zeros(n)

    def neighbour_sets(emb: np.ndarray) -> np.ndarray:
        idx = search(np.asarray(emb), np.asarray(emb), k + 1, "cosine")[1]
        own = idx == np.arange(n)[:, None]
        own[~own.any(axis=1), -1] = True  # the point crowded out by k exact duplicates: drop the farthest instead
        return idx[~own].reshape(n, k)

    ref, tuned = neighbour_sets(ref_emb), neighbour_sets(tuned_emb)
    kept = (ref[:, :, None] == tuned[:, None, :]).any(axis=2).sum(axis=1)  # each row's neighbours are distinct
    return 1 - kept / k


def fit_onto(points: np.ndarray, target: np.ndarray, anchors: np.ndarray | None = None) -> np.ndarray:
    """`points` carried into `target`'s frame by the least-squares affine map between them, fitted on the `anchors`
    rows only (a boolean mask or indices; default all). An aligned map keeps the reference layout's orientation but
    not its scale (t-SNE spreads it again from a tiny start; UMAP rescales its start into its own box per axis), so
    positions from the two maps compare only after this fit."""
    points = np.asarray(points, dtype=np.float64)
    design = np.column_stack([points, np.ones(len(points))])
    fit = slice(None) if anchors is None else anchors
    coef = np.linalg.lstsq(design[fit], np.asarray(target, dtype=np.float64)[fit], rcond=None)[0]
    return design @ coef


# --- how well a map keeps neighbourhoods (bench/maps.py) ------------------------------------------------


def _map_neighbours(points: np.ndarray, k: int) -> np.ndarray:
    """(n, k) indices of each point's k nearest other points on a 2-D map."""
    from sklearn.neighbors import NearestNeighbors

    pts = np.asarray(points, dtype=np.float64)
    idx = NearestNeighbors(n_neighbors=k + 1).fit(pts).kneighbors(pts, return_distance=False)
    return np.array([[j for j in row if j != i][:k] for i, row in enumerate(idx)])


def neighbours_kept(a: np.ndarray, b: np.ndarray, k: int = 10) -> float:
    """Mean share of each point's k nearest map neighbours in `a` that are also among them in `b`: how much
    of one map's local structure another keeps, whatever its rotation or scale."""
    na, nb = _map_neighbours(a, k), _map_neighbours(b, k)
    return float(np.mean([len(set(ra) & set(rb)) / k for ra, rb in zip(na, nb)]))


def map_knn_accuracy(points: np.ndarray, labels: Sequence, k: int = 10) -> float:
    """Leave-one-out kNN accuracy on the map's 2-D coordinates (majority of the k nearest other points,
    ties to the nearest's label among the tied): how well the map separates the labels."""
    labels = np.asarray(labels)
    hits = 0
    for i, row in enumerate(_map_neighbours(points, k)):
        values, counts = np.unique(labels[row], return_counts=True)
        tied = set(values[counts == counts.max()])
        hits += next(labels[j] for j in row if labels[j] in tied) == labels[i]
    return hits / len(labels)
