"""Seed 000, Table 1 reference row: all-MiniLM-L6-v2 as model and reference on SST-2 (docs/definitions.md, P@k and S@k).

Targets are the validation split, the source pool is 5x their number sampled from train (seed 0), k = 16,
all through core.evaluation.evaluate.evaluate. Printed next to the published P 63.0 (sd 21.9), S 46.6 (sd 7.4).
As an in-process cross-check, P and S are recomputed independently from the definition with plain
SentenceTransformer.encode and a numpy brute-force search on the same targets and pool.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from bench.common import Options, data_file, header, line, load_minilm, set_seeds

PUBLISHED = {"polarity": 63.0, "polarity_sd": 21.9, "similarity": 46.6, "similarity_sd": 7.4}
K = 16


def _subset(corpus, n_train: int, n_test: int, seed: int = 0):
    """A smaller corpus for --quick (figures are then not comparable with the published row)."""
    rng = np.random.default_rng(seed)
    tr = np.sort(rng.choice(len(corpus.train_texts), min(n_train, len(corpus.train_texts)), replace=False))
    te = np.arange(min(n_test, len(corpus.test_texts)))
    return replace(corpus, train_texts=[corpus.train_texts[i] for i in tr], train_labels=corpus.train_labels[tr],
                   test_texts=[corpus.test_texts[i] for i in te], test_labels=corpus.test_labels[te])


def independent_scores(model, corpus, k: int = K, factor: int = 5, seed: int = 0) -> dict:
    """P@k and S@k straight from the definition, sharing no code with core.evaluation.metrics / core.models.encode."""
    n_train, n_test = len(corpus.train_texts), len(corpus.test_texts)
    pool = np.sort(np.random.default_rng(seed).choice(n_train, size=min(factor * n_test, n_train), replace=False))
    targets = model.encode(corpus.test_texts, batch_size=64, show_progress_bar=False, normalize_embeddings=True)
    source = model.encode([corpus.train_texts[i] for i in pool], batch_size=64, show_progress_bar=False,
                          normalize_embeddings=True)
    cos = targets @ source.T  # M = R here, so one cosine matrix serves retrieval and scoring
    top = np.argsort(-cos, axis=1, kind="stable")[:, :k]
    w = np.array([2 * (k + 1 - i) / (k * (k + 1)) for i in range(1, k + 1)])
    same = corpus.train_labels[pool][top] == corpus.test_labels[:, None]
    p = same @ w
    s = np.take_along_axis(cos, top, axis=1).astype(np.float64) @ w
    return {"polarity": p.mean() * 100, "polarity_sd": p.std() * 100,
            "similarity": s.mean() * 100, "similarity_sd": s.std() * 100}


def run(opts: Options) -> None:
    from core.data.corpus import load_corpus
    from core.evaluation.evaluate import EvalSettings, evaluate

    set_seeds()
    corpus = load_corpus(data_file("sst2.csv"))
    if opts.quick:
        corpus = _subset(corpus, n_train=2000, n_test=200)
    model = load_minilm()
    t0 = time.perf_counter()
    ours = evaluate(model, model, corpus, EvalSettings(k=K, pool_factor=5, seed=0))
    t_ours = time.perf_counter() - t0
    check = independent_scores(model, corpus)

    header("reference: seed 000 Table 1 reference row",
           f"all-MiniLM-L6-v2 as M and R, SST-2 {corpus.target_split} ({ours['n_queries']} targets), "
           f"pool {ours['n_pool']} from train (5x, seed 0), k = {ours['k']}")
    if opts.quick:
        line("NOTE", "--quick: 2,000 train / 200 targets; not comparable")
    line("ours  P@16 (sd)", f"{ours['polarity']:.1f} ({ours['polarity_sd']:.1f})")
    line("ours  S@16 (sd)", f"{ours['similarity']:.1f} ({ours['similarity_sd']:.1f})")
    line("published P@16 (sd)", f"{PUBLISHED['polarity']:.1f} ({PUBLISHED['polarity_sd']:.1f})")
    line("published S@16 (sd)", f"{PUBLISHED['similarity']:.1f} ({PUBLISHED['similarity_sd']:.1f})")
    line("difference ours - published",
         f"P {ours['polarity'] - PUBLISHED['polarity']:+.1f}  S {ours['similarity'] - PUBLISHED['similarity']:+.1f}")
    line("ratio ours / published", f"P {ours['polarity'] / PUBLISHED['polarity']:.2f}  "
                                   f"S {ours['similarity'] / PUBLISHED['similarity']:.2f}")
    line("independent recomputation P (sd)", f"{check['polarity']:.1f} ({check['polarity_sd']:.1f})")
    line("independent recomputation S (sd)", f"{check['similarity']:.1f} ({check['similarity_sd']:.1f})")
    agree = abs(check["polarity"] - ours["polarity"]) < 0.05 and abs(check["similarity"] - ours["similarity"]) < 0.05
    line("core agrees with recomputation", "yes" if agree else
         f"NO (P {ours['polarity'] - check['polarity']:+.3f}, S {ours['similarity'] - check['similarity']:+.3f})")
    line("kNN accuracy (k=10, euclidean)", f"{ours['knn_accuracy'] * 100:.1f}")
    line("evaluate wall time", f"{t_ours:.1f} s")
