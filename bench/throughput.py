"""Encoding throughput and neighbour search.

1. core.models.encode.encode vs plain SentenceTransformer.encode (torch's own threads) on the same texts, batch 64,
   in texts/s, each of our engines forced in turn: ONNX Runtime (core.models.engine, CONTRASTLAB_ENGINE=onnx; its
   graph's export and check are timed apart, not counted), torch's worker pool as the policy decides
   (core.models.encode_pool; aim ours / theirs >= 1.5 on 2 cores) and torch in-process (CONTRASTLAB_ENCODE_WORKERS=0;
   aim >= 0.95: our extra outputs must not cost throughput). The pool's start-up is timed apart and not counted.
2. The same arms on a busy machine (CPU): a process spinning on each usable core beside them, as a laptop's browser
   and a second run would. In-process, ours uses one thread per free core (core.models.threads); torch's own
   threads collapse when oversubscribed (aim: ours / theirs >= 1.5 busy).
3. core.evaluation.metrics.knn_accuracy (FAISS) vs a vectorised numpy brute-force kNN with the same vote rule on the
   same embeddings: time ratio and equal accuracy.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """Environment variables set for the block, then as they were: an arm's engine and worker count."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value


def _spin(stop) -> None:
    while not stop.is_set():
        pass


@contextmanager
def spinning(processes: int) -> Iterator[None]:
    """`processes` processes each spinning on a core for the block: a machine busy with other work."""
    stop = multiprocessing.get_context("spawn").Event()
    spinners = [multiprocessing.get_context("spawn").Process(target=_spin, args=(stop,), daemon=True)
                for _ in range(processes)]
    for spinner in spinners:
        spinner.start()
    time.sleep(1.0)  # started and spinning
    try:
        yield
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()


def run(opts: Options) -> None:
    import torch

    from core.evaluation.metrics import knn_accuracy
    from core.models.encode import encode
    from core.models.encode_pool import ENV as WORKERS
    from core.models.encode_pool import pool_size
    from core.models.engine import ENV as ENGINE

    set_seeds()
    gpu = opts.device != "cpu"
    n = (4000 if opts.quick else 20000) if gpu else (500 if opts.quick else 4000)
    repeats = 2 if opts.quick else 3
    texts, labels = sst2_texts(n)
    labels = np.asarray(labels)
    model = load_minilm(opts.device)

    def ours(**settings: str):
        def arm(chunk: list[str]) -> np.ndarray:
            with environment(**settings):
                return encode(model, chunk, batch_size=BATCH).embeddings

        return arm

    # The pool's start-up, not counted: the first encode the policy sends to it starts the workers, ships the model.
    # On a GPU neither the pool nor ONNX Runtime runs, so those arms would time the same code again: left out.
    workers = pool_size(model, -(-CHUNK // BATCH))
    t0 = time.perf_counter()
    ours(**{ENGINE: "torch"})(texts[:CHUNK])
    started = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours(**{ENGINE: "onnx"})(texts[:BATCH])  # exports the model's graph and checks it against torch
    exported = time.perf_counter() - t0
    # Chunks of 8 batches, each encoded by every arm in turn (A B C, C B A, ...); each arm sorts by length.
    chunks = [texts[i : i + CHUNK] for i in range(0, n, CHUNK)]
    arms = {"pool": ours(**{ENGINE: "torch"}),
            "theirs": lambda c: model.encode(c, batch_size=BATCH, show_progress_bar=False, convert_to_numpy=True)}
    if not gpu:
        arms["in-process"] = ours(**{ENGINE: "torch", WORKERS: "0"})
        arms["onnx"] = ours(**{ENGINE: "onnx"})
    t, runs, outs = paired(arms, chunks, repeats=repeats, warmup=texts[:BATCH], budget_s=120 if opts.quick else 420)
    emb = {name: np.concatenate(parts) for name, parts in outs.items()}
    diff = {name: float(np.abs(emb[name] - emb["theirs"]).max()) for name in arms if name != "theirs"}
    threads = torch.get_num_threads()
    where = torch.cuda.get_device_name() if gpu else "CPU"
    header("throughput: core.models.encode.encode (ONNX Runtime; torch's worker pool; torch in-process) vs "
           "SentenceTransformer.encode",
           f"all-MiniLM-L6-v2, {n} SST-2 texts, batch {BATCH}, {where}; arms alternate every {CHUNK} texts; "
           f"median of {len(runs['pool'])} repeats, {load_note()}")
    if gpu:
        line("ours (in-process on the GPU)", f"{n / t['pool']:.0f} texts/s  ({t['pool']:.2f} s)")
        line("SentenceTransformer.encode", f"{n / t['theirs']:.0f} texts/s  ({t['theirs']:.2f} s)")
        line("all repeats (s, in order)", runs_note(runs))
        line("ratio ours / theirs", f"{ratio(t['theirs'], t['pool'])}  (aim >= 0.95: our extra outputs must not "
                                    "cost throughput)")
    else:
        pool_note = (f"1 torch thread each; start-up {started:.1f} s (start, imports, model shipped), not counted"
                     if workers else "the policy chose in-process")
        line("ours, ONNX Runtime (free cores)",
             f"{n / t['onnx']:.0f} texts/s  ({t['onnx']:.2f} s; export and check {exported:.1f} s, not counted)")
        line(f"ours, torch pool of {workers} workers", f"{n / t['pool']:.0f} texts/s  ({t['pool']:.2f} s; {pool_note})")
        line(f"ours, torch in-process ({threads} threads)",
             f"{n / t['in-process']:.0f} texts/s  ({t['in-process']:.2f} s)")
        line(f"SentenceTransformer.encode ({threads} thr.)", f"{n / t['theirs']:.0f} texts/s  ({t['theirs']:.2f} s)")
        line("all repeats (s, in order)", runs_note(runs))
        line("ratio ours(ONNX Runtime) / theirs", ratio(t["theirs"], t["onnx"]))
        line("ratio ours(pool) / theirs", f"{ratio(t['theirs'], t['pool'])}  (aim >= 1.5)")
        line("ratio ours(in-process) / theirs", f"{ratio(t['theirs'], t['in-process'])}  (aim >= 0.95)")
        line("ratio ONNX Runtime / torch in-process", ratio(t["in-process"], t["onnx"]))
    line("same embeddings", "; ".join(f"{name} {'yes' if d < 1e-5 else 'NO'} (max |diff| {d:.1e})"
                                      for name, d in diff.items()))
    if not gpu:
        from core.models.threads import usable_cores

        busy = usable_cores()
        with spinning(busy):
            tb, busy_runs, _ = paired(arms, chunks, repeats=1 if opts.quick else 2, warmup=texts[:BATCH],
                                      budget_s=240 if opts.quick else 600)
            note = load_note()
        print()
        header("throughput on a busy machine: the same arms beside a process spinning on each usable core",
               f"{busy} spinning processes, {n} texts, median of {len(busy_runs['pool'])} repeats, {note}")
        for name, label in (("onnx", "ours, ONNX Runtime (free cores)"), ("pool", f"ours, pool of {workers} workers"),
                            ("in-process", "ours, in-process (free cores)"),
                            ("theirs", f"SentenceTransformer.encode ({threads} thr.)")):
            line(label, f"{n / tb[name]:.0f} texts/s  ({tb[name]:.2f} s; {t[name] / tb[name]:.2f} of quiet)")
        line("ratio ours(ONNX Runtime) / theirs", f"{ratio(tb['theirs'], tb['onnx'])}  (aim >= 1.5)")
        line("ratio ours(pool) / theirs", ratio(tb["theirs"], tb["pool"]))
        line("ratio ours(in-process) / theirs", f"{ratio(tb['theirs'], tb['in-process'])}  (aim >= 1.5)")
        line("ratio ONNX Runtime / torch in-process", ratio(tb["in-process"], tb["onnx"]))

    # kNN on those embeddings: the validation rows (first in `texts`) are the queries, the rest the base.
    x = emb["pool"]
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
