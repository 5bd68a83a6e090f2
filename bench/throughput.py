"""Encoding throughput and neighbour search.

1. core.models.encode.encode vs plain SentenceTransformer.encode on the same texts, batch 64: texts/s of both
   and ours/theirs (the aim is >= 0.95: our extra outputs must not cost throughput).
2. core.evaluation.metrics.knn_accuracy (FAISS) vs a vectorised numpy brute-force kNN with the same vote rule on the
   same embeddings: time ratio and equal accuracy.
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
    paired,
    ratio,
    runs_note,
    set_seeds,
    sst2_texts,
)

BATCH = 64
CHUNK = 8 * BATCH
KNN_K = 10


def numpy_knn_accuracy(train: np.ndarray, train_labels: np.ndarray, test: np.ndarray, test_labels: np.ndarray,
                       k: int = KNN_K) -> float:
    """Brute force in numpy: squared Euclidean distances by one matrix product, top k by argpartition,
    majority vote, ties to the class with the nearest vote (the rule core.evaluation.metrics uses)."""
    train = train.astype(np.float32)
    test = test.astype(np.float32)
    d = (test * test).sum(1)[:, None] - 2.0 * test @ train.T + (train * train).sum(1)[None, :]
    k = min(k, len(train))
    part = np.argpartition(d, k - 1, axis=1)[:, :k]
    idx = np.take_along_axis(part, np.argsort(np.take_along_axis(d, part, 1), axis=1, kind="stable"), 1)
    labels = train_labels[idx]
    n_classes = int(train_labels.max()) + 1
    votes = np.zeros((len(test), n_classes))
    weight = 1.0 + 1e-3 * 0.5 ** np.arange(k)
    np.add.at(votes, (np.arange(len(test))[:, None], labels), weight)
    return float((votes.argmax(1) == test_labels).mean())


def run(opts: Options) -> None:
    from core.evaluation.metrics import knn_accuracy
    from core.models.encode import encode

    set_seeds()
    n = 500 if opts.quick else 4000
    repeats = 2 if opts.quick else 3
    texts, labels = sst2_texts(n)
    labels = np.asarray(labels)
    model = load_minilm()
    # Chunks of 8 batches, each encoded by both arms in turn (A B, B A, ...); each arm sorts by length.
    chunks = [texts[i : i + CHUNK] for i in range(0, n, CHUNK)]
    t, runs, outs = paired({"ours": lambda c: encode(model, c, batch_size=BATCH).embeddings,
                            "theirs": lambda c: model.encode(c, batch_size=BATCH, show_progress_bar=False,
                                                             convert_to_numpy=True)},
                           chunks, repeats=repeats, warmup=texts[:BATCH], budget_s=120 if opts.quick else 420)
    emb = {name: np.concatenate(parts) for name, parts in outs.items()}
    diff = float(np.abs(emb["ours"] - emb["theirs"]).max())
    header("throughput: core.models.encode.encode vs SentenceTransformer.encode",
           f"all-MiniLM-L6-v2, {n} SST-2 texts, batch {BATCH}, CPU; arms alternate every {CHUNK} texts; "
           f"median of {len(runs['ours'])} repeats, {load_note()}")
    line("ours", f"{n / t['ours']:.0f} texts/s  ({t['ours']:.2f} s)")
    line("SentenceTransformer.encode", f"{n / t['theirs']:.0f} texts/s  ({t['theirs']:.2f} s)")
    line("all repeats (s, in order)", runs_note(runs))
    line("ratio ours / theirs (texts/s)", f"{ratio(t['theirs'], t['ours'])}  (aim >= 0.95)")
    line("same embeddings", f"{'yes' if diff < 1e-4 else 'NO'} (max |diff| {diff:.1e})")

    # kNN on those embeddings: the validation rows (first in `texts`) are the queries, the rest the base.
    x = emb["ours"]
    n_test = min(872, n // 4)
    test, test_y, train, train_y = x[:n_test], labels[:n_test], x[n_test:], labels[n_test:]
    acc: dict[str, float] = {}

    def faiss_knn():
        acc["faiss"] = knn_accuracy(train, train_y, test, test_y, k=KNN_K)

    def numpy_knn():
        acc["numpy"] = numpy_knn_accuracy(train, train_y, test, test_y, k=KNN_K)

    knn_repeats = 10 if opts.quick else 20
    tk, knn_runs = interleaved({"faiss": faiss_knn, "numpy": numpy_knn}, repeats=knn_repeats,
                                warmup={"faiss": faiss_knn, "numpy": numpy_knn}, budget_s=60)
    print()
    header("throughput: FAISS kNN (core.evaluation.metrics.knn_accuracy) vs numpy brute force",
           f"k = {KNN_K}, euclidean, {len(test)} queries x {len(train)} base vectors of dim {x.shape[1]}, "
           f"median of {len(knn_runs['faiss'])} interleaved repeats, {load_note()}")
    line("ours (FAISS)", f"{tk['faiss'] * 1000:.1f} ms  (accuracy {acc['faiss'] * 100:.1f})")
    line("numpy brute force", f"{tk['numpy'] * 1000:.1f} ms  (accuracy {acc['numpy'] * 100:.1f})")
    line("speed-up numpy / FAISS", f"{ratio(tk['numpy'], tk['faiss'])}x")
    line("same accuracy", "yes" if abs(acc["faiss"] - acc["numpy"]) < 1e-9 else "NO")
