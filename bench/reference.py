"""Seed 000, Table 1 reference row: all-MiniLM-L6-v2 as model and reference on SST-2 (docs/definitions.md, P@k and S@k).

Targets are the validation split, the source pool is 5x their number sampled from train (seed 0), k = 16,
all through core.evaluation.evaluate (eval_sets, encode_for_eval, score). Printed next to the published P 63.0
(sd 21.9), S 46.6 (sd 7.4) under both rank discounts, the paper's text's linear one and none (uniform 1/k, its
released code's default), both scored from one encoding. As an in-process cross-check, P and S are recomputed
independently from the definition with plain SentenceTransformer.encode and a numpy brute-force search on the same
targets and pool, again both weightings from one encoding.
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


def independent_scores(model, corpus, k: int = K, factor: int = 5, seed: int = 0) -> dict[str, dict]:
    """P@k and S@k straight from the definition, sharing no code with core.evaluation.metrics / core.models.encode,
    per rank discount ("linear", "none")."""
    n_train, n_test = len(corpus.train_texts), len(corpus.test_texts)
    pool = np.sort(np.random.default_rng(seed).choice(n_train, size=min(factor * n_test, n_train), replace=False))
    targets = model.encode(corpus.test_texts, batch_size=64, show_progress_bar=False, normalize_embeddings=True)
    source = model.encode([corpus.train_texts[i] for i in pool], batch_size=64, show_progress_bar=False,
                          normalize_embeddings=True)
    cos = targets @ source.T  # M = R here, so one cosine matrix serves retrieval and scoring
    top = np.argsort(-cos, axis=1, kind="stable")[:, :k]
    same = corpus.train_labels[pool][top] == corpus.test_labels[:, None]
    cos_top = np.take_along_axis(cos, top, axis=1).astype(np.float64)
    weights = {"linear": np.array([2 * (k + 1 - i) / (k * (k + 1)) for i in range(1, k + 1)]),
               "none": np.ones(k) / k}
    out = {}
    for discount, w in weights.items():
        p, s = same @ w, cos_top @ w
        out[discount] = {"polarity": p.mean() * 100, "polarity_sd": p.std() * 100,
                         "similarity": s.mean() * 100, "similarity_sd": s.std() * 100}
    return out


def run(opts: Options) -> None:
    from core.data.corpus import load_corpus
    from core.evaluation.evaluate import EvalSettings, encode_for_eval, eval_sets, score
    from core.evaluation.headline import DISCOUNTS

    set_seeds()
    corpus = load_corpus(data_file("sst2.csv"))
    if opts.quick:
        corpus = _subset(corpus, n_train=2000, n_test=200)
    model = load_minilm()
    settings = EvalSettings(k=K, pool_factor=5, seed=0)
    t0 = time.perf_counter()
    sets = eval_sets(corpus, settings)
    train, test = encode_for_eval(model, corpus, sets, "model")  # once: M = R, and both discounts score it
    ours = {d: score(corpus, sets, replace(settings, discount=d), train, test, train, test) for d in DISCOUNTS}
    t_ours = time.perf_counter() - t0
    check = independent_scores(model, corpus)

    first = ours[DISCOUNTS[0]]
    header("reference: seed 000 Table 1 reference row",
           f"all-MiniLM-L6-v2 as M and R, SST-2 {corpus.target_split} ({first['n_queries']} targets), "
           f"pool {first['n_pool']} from train (5x, seed 0), k = {first['k']}; rank discount linear (the paper's "
           "text) and none (1/k each, its released code's default), from one encoding")
    if opts.quick:
        line("NOTE", "--quick: 2,000 train / 200 targets; not comparable")
    line("published P@16 (sd)", f"{PUBLISHED['polarity']:.1f} ({PUBLISHED['polarity_sd']:.1f})")
    line("published S@16 (sd)", f"{PUBLISHED['similarity']:.1f} ({PUBLISHED['similarity_sd']:.1f})")
    for discount in DISCOUNTS:
        mine, theirs = ours[discount], check[discount]
        line(f"ours {discount}  P@16 (sd)", f"{mine['polarity']:.1f} ({mine['polarity_sd']:.1f})")
        line(f"ours {discount}  S@16 (sd)", f"{mine['similarity']:.1f} ({mine['similarity_sd']:.1f})")
        line(f"{discount}: ours - published", f"P {mine['polarity'] - PUBLISHED['polarity']:+.1f}  "
                                              f"S {mine['similarity'] - PUBLISHED['similarity']:+.1f}")
        line(f"{discount}: ratio ours / published", f"P {mine['polarity'] / PUBLISHED['polarity']:.2f}  "
                                                    f"S {mine['similarity'] / PUBLISHED['similarity']:.2f}")
        line(f"{discount}: independent P (sd)", f"{theirs['polarity']:.1f} ({theirs['polarity_sd']:.1f})")
        line(f"{discount}: independent S (sd)", f"{theirs['similarity']:.1f} ({theirs['similarity_sd']:.1f})")
        agree = (abs(theirs["polarity"] - mine["polarity"]) < 0.05
                 and abs(theirs["similarity"] - mine["similarity"]) < 0.05)
        line(f"{discount}: core agrees", "yes" if agree else
             f"NO (P {mine['polarity'] - theirs['polarity']:+.3f}, S {mine['similarity'] - theirs['similarity']:+.3f})")
    line("kNN accuracy (k=10, euclidean)", f"{first['knn_accuracy'] * 100:.1f}")
    line("encode + score wall time", f"{t_ours:.1f} s")
