"""Maps: both t-SNE maps (reference, then the fine-tuned one aligned to it) against openTSNE's defaults, what each
costs and keeps; and UMAP's first map in a fresh process, numba compiling per process vs once per machine.

t-SNE arms, alternating: `defaults`, openTSNE's `TSNE(random_state=0).fit(x)` (Annoy neighbours, the FFT grid at
one interval per map unit, one thread): the baseline every ratio is against. `previous`, the reference map as
ContrastLab computed it before (the same, on all cores from 5,000 points). `reference` and `aligned`, ours:
core.analysis.projection.tsne on the reference embeddings, then on the fine-tuned stand-in from that map; `one
thread`, both of ours with n_jobs=1 (threads cost more than they save on cores other work keeps busy). The
fine-tuned model is stood in for by all-MiniLM-L6-v2 with CLS instead of mean pooling: the same texts, another
embedding. A second, untimed run of the default schedule from a start moved by 10% of its spread shows how much
two equally valid runs differ. Quality of each reference map: the exact KL divergence (t-SNE's objective) against
one set of affinities (exact neighbours), the leave-one-out 10-NN accuracy of the SST-2 labels on the 2-D
coordinates, and the share of each text's 10 nearest neighbours in the embedding (cosine) among its 10 nearest on
the map. The aligned map: the share of each point's 10 nearest map neighbours it keeps from the reference map.
Where the time goes: neighbour search + affinities (Annoy vs FAISS) timed apart, alternating.

UMAP arms, each a fresh Python process drawing one map of 2,000 (quick: 500) texts, alternating: `before`, plain
umap-learn as ContrastLab called it before (numba's own caching: most of pynndescent's functions, one of umap's);
`warm`, core.analysis.projection.umap_2d with a numba cache folder an earlier process filled; `cold`, the same with
an empty one (a machine's first map). Seconds include Python's start and the imports.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    REPO,
    Options,
    header,
    interleaved,
    line,
    load_minilm,
    load_note,
    ratio,
    runs_note,
    set_seeds,
    sst2_texts,
)

K = 10
UMAP_SCRIPT = """
import sys, numpy as np
x = np.load(sys.argv[2])
if sys.argv[1] == "before":
    import umap
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    out = umap.UMAP(n_neighbors=15, min_dist=0.1, init="spectral", random_state=0, n_jobs=1).fit_transform(x)
else:
    from core.analysis.projection import umap_2d
    out = umap_2d(x)
np.save(sys.argv[3], out)
"""


def unit(emb: np.ndarray) -> np.ndarray:
    return (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)


def defaults(emb: np.ndarray, n_jobs: int = 1, init: np.ndarray | str = "pca") -> np.ndarray:
    """openTSNE's defaults (n_jobs=1); with the threads projection.tsne picks, the reference map as ContrastLab computed
    it before."""
    from openTSNE import TSNE

    return np.asarray(TSNE(random_state=0, n_jobs=n_jobs, initialization=init).fit(unit(emb)), dtype=np.float32)


def cls_pooled(model):
    """The same transformer with CLS pooling: a second embedding of the same texts, as a fine-tuned model gives."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling

    dim = model.get_embedding_dimension()
    return SentenceTransformer(modules=[model[0], Pooling(dim, pooling_mode="cls"), Normalize()], device="cpu")


def exact_kl(P, points: np.ndarray) -> float:
    """KL(P || Q) with Q from all n² pairs of the map (no approximation), P openTSNE's sparse affinities."""
    y = points.astype(np.float64)
    sq = (y ** 2).sum(1)
    z = 0.0
    for a in range(0, len(y), 1000):
        d2 = np.clip(sq[a:a + 1000, None] + sq[None] - 2 * y[a:a + 1000] @ y.T, 0, None)
        z += (1 / (1 + d2)).sum() - len(d2)  # minus the diagonal (d = 0, kernel 1)
    p = P.tocoo()
    q = 1 / (1 + ((y[p.row] - y[p.col]) ** 2).sum(1)) / z
    return float((p.data * np.log(p.data / q)).sum())


def tsne_arms(opts: Options, ref_emb: np.ndarray, tuned_emb: np.ndarray, labels: list[int]) -> None:
    from openTSNE.affinity import PerplexityBasedNN

    from core.analysis import projection

    n = len(ref_emb)
    perplexity = projection.effective_perplexity(n, 30)
    jobs = 1 if n < projection.PARALLEL_ABOVE else -1
    x = unit(ref_emb)
    ours_ref = projection.tsne(ref_emb)  # warms up openTSNE, FAISS and the thread pools; also the aligned start
    maps: dict[str, np.ndarray] = {}

    def keep(name: str, fn):
        return lambda: maps.__setitem__(name, fn())

    arms = {"defaults": keep("defaults", lambda: defaults(ref_emb)),
            "previous": keep("previous", lambda: defaults(ref_emb, n_jobs=jobs)),
            "reference": keep("reference", lambda: projection.tsne(ref_emb)),
            "aligned": keep("aligned", lambda: projection.tsne(tuned_emb, init=ours_ref)),
            "one thread": lambda: projection.tsne(tuned_emb, init=projection.tsne(ref_emb, n_jobs=1), n_jobs=1)}
    t, runs = interleaved(arms, repeats=3, budget_s=150 if opts.quick else 480)
    np.testing.assert_array_equal(maps["reference"], ours_ref)  # the timed reference map is the aligned start
    knn_t, knn_runs = interleaved({
        "annoy": lambda: PerplexityBasedNN(x, perplexity, method="annoy", n_jobs=jobs, random_state=0),
        "faiss": lambda: projection.affinities(x, perplexity, jobs)}, repeats=3, budget_s=60)
    jitter = np.random.default_rng(1).normal(scale=1e-5, size=(n, 2))  # openTSNE's PCA start has std 1e-4
    from openTSNE.initialization import pca

    maps["rerun"] = defaults(ref_emb, n_jobs=jobs, init=pca(x, random_state=0) + jitter)

    both = t["reference"] + t["aligned"]
    header("maps: both t-SNE maps (reference, aligned fine-tuned) vs openTSNE's defaults",
           f"all-MiniLM-L6-v2 mean pooling (reference) vs CLS pooling (fine-tuned stand-in), {n:,} SST-2 texts; "
           f"ours: FAISS exact neighbours, FFT from {projection.FFT_FROM:,} points with "
           f"{projection.INTS_IN_INTERVAL} map units per interval, {projection.FULL_EARLY_ITERS} exaggerated + "
           f"{projection.FULL_ITERS} iterations, aligned {projection.ALIGNED_ITERS} from the reference layout; "
           f"median of {len(runs['reference'])} rounds, {load_note()}")
    line("openTSNE defaults (1 thread)", f"{t['defaults']:.1f} s")
    line("previous reference map", f"{t['previous']:.1f} s  ({ratio(t['previous'], t['defaults'])}x)")
    line("ours: reference map", f"{t['reference']:.1f} s  ({ratio(t['reference'], t['defaults'])}x)")
    line("ours: aligned map", f"{t['aligned']:.1f} s  ({ratio(t['aligned'], t['defaults'])}x)")
    line("ours: both maps", f"{both:.1f} s  ({ratio(both, t['defaults'])}x defaults, "
                            f"{ratio(both, t['previous'])}x previous)")
    line("ours: both maps, one thread", f"{t['one thread']:.1f} s  ({ratio(t['one thread'], both)}x ours with "
                                        f"{'one thread' if jobs == 1 else 'all cores'})")
    line("all rounds (s, in order)", runs_note(runs))
    line("neighbours + affinities", f"Annoy {knn_t['annoy']:.1f} s, FAISS {knn_t['faiss']:.1f} s "
                                    f"({ratio(knn_t['faiss'], knn_t['annoy'])}x); {runs_note(knn_runs)}")
    P = projection.affinities(x, perplexity, jobs).P
    names = ("defaults", "previous", "rerun", "reference")
    shown = {"defaults": "defaults", "previous": "previous", "rerun": "rerun of defaults", "reference": "ours"}
    line("", " / ".join(shown[m] for m in names))
    line("KL divergence (exact)", " / ".join(f"{exact_kl(P, maps[m]):.3f}" for m in names))
    line(f"map {K}-NN accuracy", " / ".join(f"{projection.map_knn_accuracy(maps[m], labels, K):.3f}" for m in names))
    line(f"embedding {K}-NN kept on the map", " / ".join(f"{projection.neighbours_kept(x, maps[m], K):.3f}"
                                                         for m in names))
    line(f"{K}-NN kept from defaults' map", " / ".join(f"{projection.neighbours_kept(maps['defaults'], maps[m], K):.3f}"
                                                       for m in names))
    line(f"aligned: {K}-NN kept from ref. map", f"{projection.neighbours_kept(ours_ref, maps['aligned'], K):.3f}")
    line(f"aligned: map {K}-NN accuracy", f"{projection.map_knn_accuracy(maps['aligned'], labels, K):.3f}")


def umap_arms(opts: Options, emb: np.ndarray) -> None:
    n = 500 if opts.quick else 2000
    with tempfile.TemporaryDirectory(prefix="bench-maps-umap-") as tmp:
        data, warm_dir = Path(tmp) / "x.npy", Path(tmp) / "warm"
        np.save(data, emb[:n])
        outs: dict[str, Path] = {}

        def fresh(arm: str, cache: Path | None):
            def go() -> None:
                env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
                if cache is not None:
                    env["NUMBA_CACHE_DIR"] = str(cache)
                outs[arm] = Path(tmp) / f"{arm}.npy"
                subprocess.run([sys.executable, "-c", UMAP_SCRIPT, "before" if cache is None else "ours",
                                str(data), str(outs[arm])], cwd=REPO, env=env, check=True, capture_output=True)
            return go

        cold = {"i": 0}

        def cold_run() -> None:
            cold["i"] += 1
            fresh("cold", Path(tmp) / f"cold{cold['i']}")()

        fresh("warm", warm_dir)()  # fills the warm folder, untimed
        t0 = time.perf_counter()
        fresh("before", None)()  # and numba's own in-package caches, as on any machine that drew a map before
        first_before = time.perf_counter() - t0
        t, runs = interleaved({"before": fresh("before", None), "cold": cold_run, "warm": fresh("warm", warm_dir)},
                              repeats=3, budget_s=120 if opts.quick else 300)
        same = np.array_equal(np.load(outs["cold"]), np.load(outs["warm"]))
    header("maps: UMAP's first map in a fresh process, numba compiling per process vs once per machine",
           f"{n:,} SST-2 texts (all-MiniLM-L6-v2); before: plain umap-learn with numba's own caching; ours: "
           f"core.analysis.projection.umap_2d with its numba cache empty (cold) or filled (warm); median of "
           f"{len(runs['warm'])} rounds, {load_note()}")
    line("before (compiles every process)", f"{t['before']:.1f} s  (first after the warm-up: {first_before:.1f} s)")
    line("ours, cold cache (once per machine)", f"{t['cold']:.1f} s  ({ratio(t['cold'], t['before'])}x before)")
    line("ours, warm cache", f"{t['warm']:.1f} s  ({ratio(t['warm'], t['before'])}x before)")
    line("all rounds (s, in order)", runs_note(runs))
    line("cold and warm maps identical", str(same))


def run(opts: Options) -> None:
    from core.models.encode import encode

    set_seeds()
    n = 2000 if opts.quick else 10000
    texts, labels = sst2_texts(n)
    model = load_minilm()
    ref_emb = encode(model, texts).embeddings
    tuned_emb = encode(cls_pooled(model), texts).embeddings
    tsne_arms(opts, ref_emb, tuned_emb, labels)
    print()
    umap_arms(opts, ref_emb)
