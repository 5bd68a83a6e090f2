"""The aligned (fine-tuned) t-SNE map: short schedule from the reference layout vs openTSNE's full schedule.

Ours: core.analysis.projection.tsne(tuned, init=reference map): the reference layout rescaled, no early
exaggeration, projection.ALIGNED_ITERS plain iterations. Baseline: the previous aligned map, openTSNE's full
schedule (early exaggeration, then 500 iterations) from the same rescaled layout. Both are timed against the
reference map itself (PCA start, full schedule), the three arms alternating. The fine-tuned model is stood in
for by all-MiniLM-L6-v2 with CLS instead of mean pooling: the same texts, a different embedding. Quality:
the share of each point's 10 nearest map neighbours that the aligned map keeps from the reference map, and
each map's leave-one-out 10-NN accuracy of the SST-2 labels on its 2-D coordinates.
"""

from __future__ import annotations

import numpy as np

from bench.common import (
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


def full_schedule(emb: np.ndarray, init: np.ndarray, seed: int) -> np.ndarray:
    """The aligned map as it was: openTSNE's default schedule from the rescaled reference layout."""
    from openTSNE import TSNE
    from openTSNE.initialization import rescale

    from core.analysis.projection import FULL_EARLY_ITERS, FULL_ITERS, PARALLEL_ABOVE, effective_perplexity

    x = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    model = TSNE(perplexity=effective_perplexity(len(x), 30), initialization=rescale(init.astype(np.float64), 1e-4),
                 early_exaggeration_iter=FULL_EARLY_ITERS, n_iter=FULL_ITERS, negative_gradient_method="auto",
                 random_state=seed, n_jobs=1 if len(x) < PARALLEL_ABOVE else -1)
    return np.asarray(model.fit(x), dtype=np.float32)


def cls_pooled(model):
    """The same transformer with CLS pooling: a second embedding of the same texts, as a fine-tuned model gives."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling

    dim = model.get_embedding_dimension()
    return SentenceTransformer(modules=[model[0], Pooling(dim, pooling_mode="cls"), Normalize()], device="cpu")


def run(opts: Options) -> None:
    from core.analysis import projection
    from core.models.encode import encode

    set_seeds()
    n = 2000 if opts.quick else 10000
    texts, labels = sst2_texts(n)
    model = load_minilm()
    ref_emb = encode(model, texts).embeddings
    tuned_emb = encode(cls_pooled(model), texts).embeddings
    ref_map = projection.tsne(ref_emb)  # the layout both aligned arms start from; also warms up openTSNE
    maps: dict[str, np.ndarray] = {}

    def keep(name: str, fn):
        return lambda: maps.__setitem__(name, fn())

    arms = {"reference": keep("reference", lambda: projection.tsne(ref_emb)),
            "full": keep("full", lambda: full_schedule(tuned_emb, ref_map, 0)),
            "short": keep("short", lambda: projection.tsne(tuned_emb, init=ref_map))}
    t, runs = interleaved(arms, repeats=3, budget_s=120 if opts.quick else 420)
    np.testing.assert_array_equal(maps["reference"], ref_map)  # the timed reference map is the start used

    header("maps: aligned t-SNE map, short schedule from the reference layout vs openTSNE's full schedule",
           f"all-MiniLM-L6-v2 mean pooling (reference) vs CLS pooling (fine-tuned stand-in), {n:,} SST-2 texts; "
           f"short = {projection.ALIGNED_ITERS} iterations, no early exaggeration; full = "
           f"{projection.FULL_EARLY_ITERS} exaggerated + {projection.FULL_ITERS}; median of {len(runs['short'])} "
           f"rounds, {load_note()}")
    line("reference map (PCA start)", f"{t['reference']:.1f} s")
    line("aligned map, full schedule (old)", f"{t['full']:.1f} s  ({ratio(t['full'], t['reference'])}x reference)")
    line("aligned map, short schedule (new)", f"{t['short']:.1f} s  ({ratio(t['short'], t['reference'])}x reference)")
    line("all rounds (s, in order)", runs_note(runs))
    line(f"{K}-NN kept from ref: old / new", f"{projection.neighbours_kept(ref_map, maps['full'], K):.3f} / "
                                             f"{projection.neighbours_kept(ref_map, maps['short'], K):.3f}")
    line(f"{K}-NN kept between old and new", f"{projection.neighbours_kept(maps['full'], maps['short'], K):.3f}")
    acc = {name: projection.map_knn_accuracy(m, labels, K) for name, m in maps.items()}
    line(f"map {K}-NN acc.: ref / old / new", f"{acc['reference']:.3f} / {acc['full']:.3f} / {acc['short']:.3f}")
    spread = maps["short"].std() / maps["full"].std()
    line("new map's spread / old map's", f"{spread:.2f}")
