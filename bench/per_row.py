"""Per-row costs behind docs/scaling.md: what one text costs to encode, one query to search, one point to place on a
map and one embedding to write as Parquet, so the doc's 10M-row arithmetic rests on figures measured here.

1. Encoding: texts/s of core.models.encode.encode (the path every cached encode takes), batch 64, on the demo corpus
   repeated; beside it SentenceTransformer.encode through a pool of CPU worker processes (start_multi_process_pool,
   encode(pool=...): the call a multi-GPU encode makes with cuda devices), its start-up and same-embeddings check.
2. Search: FAISS exact (IndexFlatIP) vs IVF and HNSW on random unit 384-d vectors, 100k and 1M rows (10k and 100k
   with --quick): build seconds, ms per query (batches of QUERIES, all cores), recall@10 against exact. Random vectors
   have no cluster structure, the worst case for an approximate index: real embeddings reach a given recall with
   fewer probes.
3. Maps: a t-SNE map (core.analysis.projection.tsne) and a UMAP of 10,000 points (2,000), then as many new points
   placed onto each (openTSNE's TSNEEmbedding.transform with a FAISS-backed neighbour index, umap-learn's
   transform): ms per placed point, and whether placed points land among their own label. The points are jittered
   copies of the demo corpus's embeddings, so the maps have real cluster structure at any size.
4. Parquet: a shard of embeddings written and read back as core.runs.export writes it (pandas, list column) vs a
   pyarrow fixed-size-list column: rows/s and bytes per row.

The full sizes take 30-45 minutes on two cores, most of it the 1M-row HNSW build; --quick takes about 4.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
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
)

BATCH = 64  # encode_cached's batch size
DIM = 384  # all-MiniLM-L6-v2's embedding size
K = 10  # recall@K and the placement check's neighbours
QUERIES = 1000
POOL_WORKERS = 2
HNSW_M = 32
IVF_NPROBES = (8, 32)
HNSW_EF = (32, 128)
JITTER = 0.5  # norm of the noise added to a unit embedding to make a new point from it
TRAIN_PER_LIST = 50  # IVF k-means training rows per list (FAISS warns below 39)


@dataclass(frozen=True)
class Sizes:
    encode: int
    search: tuple[int, ...]
    map_rows: int
    parquet: int


FULL = Sizes(encode=2000, search=(100_000, 1_000_000), map_rows=10_000, parquet=200_000)
QUICK = Sizes(encode=500, search=(10_000, 100_000), map_rows=2000, parquet=20_000)


def machine_note() -> str:
    """CPU model, cores and threads: every figure here is per this machine."""
    import faiss
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    rows = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    model = next((row.split(":", 1)[1].strip() for row in rows if row.startswith("model name")), "unknown CPU")
    return (f"{model}, {os.cpu_count()} cores, torch {torch.get_num_threads()} threads, FAISS "
            f"{faiss.omp_get_max_threads()} threads, {load_note()}")


def unit(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


# ---------------------------------------------------------------- 1. encoding


def demo_texts(n: int) -> tuple[list[str], list[str]]:
    """The demo corpus's texts and labels, repeated to n rows (SST-2-like: one sentence each)."""
    import pandas as pd

    frame = pd.read_csv(REPO / "assets" / "demo_corpus.csv")
    frame = pd.concat([frame] * -(-n // len(frame)), ignore_index=True).iloc[:n]
    return frame["text"].astype(str).tolist(), frame["label"].astype(str).tolist()


def encoding(model, texts: list[str]) -> np.ndarray:
    from core.models.encode import encode

    tokens = np.mean([len(ids) for ids in model.tokenizer(texts, truncation=True)["input_ids"]])
    previous = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # read by each spawned worker's torch: one thread per worker process
    try:
        started, pool = timed(lambda: model.start_multi_process_pool(["cpu"] * POOL_WORKERS))
    finally:
        if previous is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = previous
    out: dict[str, np.ndarray] = {}
    try:
        arms = {"ours": lambda: out.__setitem__("ours", encode(model, texts, batch_size=BATCH).embeddings),
                "pool": lambda: out.__setitem__("pool", model.encode(texts, batch_size=BATCH, pool=pool,
                                                                     show_progress_bar=False))}
        warmup = {"ours": lambda: encode(model, texts[:BATCH], batch_size=BATCH),
                  "pool": lambda: model.encode(texts[: BATCH * POOL_WORKERS], batch_size=BATCH, pool=pool)}
        t, runs = interleaved(arms, repeats=3, warmup=warmup, budget_s=300)
    finally:
        model.stop_multi_process_pool(pool)
    diff = float(np.abs(out["ours"] - out["pool"]).max())
    n = len(texts)
    header("per_row: encoding", f"all-MiniLM-L6-v2, {n} demo-corpus texts (mean {tokens:.1f} tokens), batch {BATCH}, "
           f"CPU; median of {len(runs['ours'])} interleaved repeats")
    line("core.models.encode.encode", f"{n / t['ours']:.0f} texts/s  ({t['ours'] * 1000 / n:.2f} ms per text)")
    line(f"ST.encode, pool of {POOL_WORKERS} CPU workers", f"{n / t['pool']:.0f} texts/s  (1 torch thread each; "
         f"pool start-up {started:.1f} s, not counted)")
    line("ratio pool / single process", f"{ratio(t['ours'], t['pool'])}")
    line("all repeats (s, in order)", runs_note(runs, fmt="{:.2f}"))
    line("same embeddings", f"{'yes' if diff < 1e-4 else 'NO'} (max |diff| {diff:.1e})")
    return out["ours"]


# ---------------------------------------------------------------- 2. search


def random_unit(n: int, seed: int) -> np.ndarray:
    return unit(np.random.default_rng(seed).standard_normal((n, DIM), dtype=np.float32))


def nlist_for(n: int) -> int:
    """IVF lists: the power of two nearest sqrt(n), FAISS's rule of thumb for flat lists."""
    return 2 ** int(round(np.log2(np.sqrt(n))))


def search_seconds(index, queries: np.ndarray) -> tuple[float, np.ndarray]:
    """Median seconds of 3 searches of all queries (after one untimed), and the result ids."""
    index.search(queries[:10], K)
    times, ids = [], None
    for _ in range(3):
        t, (_, ids) = timed(lambda: index.search(queries, K))
        times.append(t)
    return float(np.median(times)), ids


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(e)) / K for f, e in zip(found, exact)]))


def search(rows: int) -> None:
    import faiss

    base, queries = random_unit(rows, seed=0), random_unit(QUERIES, seed=1)
    header(f"per_row: FAISS search, {rows:,} rows", f"random unit {DIM}-d vectors, inner product, k = {K}, "
           f"{QUERIES} queries per batch, {machine_note()}")
    flat = faiss.IndexFlatIP(DIM)
    built, _ = timed(lambda: flat.add(base))
    t_flat, exact = search_seconds(flat, queries)
    flat.reset()  # frees its vectors before the next index is built
    line("flat (exact)", f"build {built:.1f} s, {t_flat * 1000 / QUERIES:.3f} ms/query, recall@{K} 1.000")

    nlist = nlist_for(rows)
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    train = base[np.random.default_rng(2).choice(rows, min(rows, TRAIN_PER_LIST * nlist), replace=False)]
    built, _ = timed(lambda: (ivf.train(train), ivf.add(base)))
    for nprobe in IVF_NPROBES:
        ivf.nprobe = nprobe
        t, ids = search_seconds(ivf, queries)
        line(f"IVF{nlist},Flat nprobe {nprobe}", f"build {built:.1f} s, {t * 1000 / QUERIES:.3f} ms/query, "
             f"recall@{K} {recall(ids, exact):.3f}, flat / IVF time {ratio(t_flat, t)}")
    ivf.reset()

    hnsw = faiss.IndexHNSWFlat(DIM, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    built, _ = timed(lambda: hnsw.add(base))
    for ef in HNSW_EF:
        hnsw.hnsw.efSearch = ef
        t, ids = search_seconds(hnsw, queries)
        line(f"HNSW{HNSW_M} efSearch {ef}", f"build {built:.1f} s ({built * 1e6 / rows:.0f} us/row), "
             f"{t * 1000 / QUERIES:.3f} ms/query, recall@{K} {recall(ids, exact):.3f}, flat / HNSW time "
             f"{ratio(t_flat, t)}")


# ---------------------------------------------------------------- 3. maps


def jittered(emb: np.ndarray, labels: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n unit vectors, each a random demo embedding plus noise of norm ~JITTER, and that embedding's label."""
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(emb), n)
    noise = rng.standard_normal((n, emb.shape[1]), dtype=np.float32) * (JITTER / np.sqrt(emb.shape[1]))
    return unit(emb[pick] + noise), labels[pick]


def faiss_neighbours(reference: np.ndarray, k: int):
    """An openTSNE KNNIndex on FAISS exact search that, unlike the PrecomputedNeighbors core.analysis.projection
    passes today, can be queried with new points, which TSNEEmbedding.transform needs."""
    from openTSNE.nearest_neighbors import KNNIndex

    from core.evaluation.metrics import search as exact_search

    class FaissNeighbours(KNNIndex):
        VALID_METRICS = ["euclidean"]

        def query(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
            scores, idx = exact_search(query, self.data, k, "cosine")
            return idx, np.sqrt(np.clip(2 - 2 * scores.astype(np.float64), 0, None))  # |a-b|² = 2-2cos on units

        def build(self) -> tuple[np.ndarray, np.ndarray]:
            idx, dist = self.query(self.data, self.k + 1)
            return idx[:, 1:], dist[:, 1:]  # drop each point itself (no exact duplicates among jittered points)

    return FaissNeighbours(reference, k)


def label_agreement(ref_map: np.ndarray, ref_labels: np.ndarray, placed: np.ndarray, labels: np.ndarray) -> float:
    """Share of placed points whose K nearest reference points on the map have their label as the majority."""
    from sklearn.neighbors import KNeighborsClassifier

    return float(KNeighborsClassifier(n_neighbors=K).fit(ref_map, ref_labels).score(placed, labels))


def maps(emb: np.ndarray, labels: np.ndarray, rows: int) -> None:
    from openTSNE import TSNEEmbedding
    from openTSNE.affinity import PerplexityBasedNN

    from core.analysis import projection

    ref, ref_labels = jittered(emb, labels, rows, seed=3)
    new, new_labels = jittered(emb, labels, rows, seed=4)
    header(f"per_row: maps, {rows:,} reference + {rows:,} placed points",
           f"jittered demo embeddings (noise norm {JITTER}), {machine_note()}")

    fitted, ref_map = timed(lambda: projection.tsne(ref))
    perplexity = projection.effective_perplexity(rows, 30)
    made, affinities = timed(lambda: PerplexityBasedNN(knn_index=faiss_neighbours(ref, int(3 * perplexity)),
                                                       perplexity=perplexity))
    embedding = TSNEEmbedding(ref_map, affinities, negative_gradient_method="fft",
                              ints_in_interval=projection.INTS_IN_INTERVAL, n_jobs=-1, random_state=0)
    placed_s, placed = timed(lambda: np.asarray(embedding.transform(new)))
    line("t-SNE fit (projection.tsne)", f"{fitted:.1f} s  ({fitted * 1000 / rows:.2f} ms/point)")
    line("t-SNE transform (openTSNE)", f"{placed_s:.1f} s  ({placed_s * 1000 / rows:.2f} ms/point; queryable "
         f"affinities {made:.1f} s once per map), placed among own label "
         f"{label_agreement(np.asarray(embedding), ref_labels, placed, new_labels):.3f}")

    projection.umap_2d(ref[:200])  # numba compiles umap-learn's functions once per process: not timed
    import umap

    model = umap.UMAP(n_components=2, n_neighbors=15, min_dist=0.1, n_epochs=projection.umap_epochs(rows),
                      random_state=0, n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # umap-learn warns that a fixed random_state means one thread
        fitted, ref_map = timed(lambda: model.fit_transform(ref))
        model.transform(new[:100])  # compiles transform's functions: not timed
        placed_s, placed = timed(lambda: model.transform(new))
    line("UMAP fit (as projection.umap_2d)", f"{fitted:.1f} s  ({fitted * 1000 / rows:.2f} ms/point)")
    line("UMAP transform", f"{placed_s:.1f} s  ({placed_s * 1000 / rows:.2f} ms/point), placed among own label "
         f"{label_agreement(ref_map, ref_labels, placed, new_labels):.3f}")


# ---------------------------------------------------------------- 4. parquet


def parquet(rows: int) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    x = random_unit(rows, seed=5)
    texts = [f"text {i}" for i in range(rows)]
    with tempfile.TemporaryDirectory(prefix="bench-per_row-") as folder:
        paths = {"pandas": Path(folder) / "pandas.parquet", "arrow": Path(folder) / "arrow.parquet"}

        def via_pandas() -> np.ndarray:
            pd.DataFrame({"text": texts}).assign(embedding=list(x)).to_parquet(paths["pandas"], index=False)
            return np.stack(pd.read_parquet(paths["pandas"])["embedding"].to_numpy())

        def via_arrow() -> np.ndarray:
            table = pa.table({"text": texts, "embedding": pa.FixedSizeListArray.from_arrays(x.ravel(), DIM)})
            pq.write_table(table, paths["arrow"])
            column = pq.read_table(paths["arrow"], columns=["embedding"]).column("embedding").combine_chunks()
            return column.flatten().to_numpy().reshape(-1, DIM)

        same = {}
        arms = {"pandas": lambda: same.__setitem__("pandas", np.array_equal(via_pandas(), x)),
                "arrow": lambda: same.__setitem__("arrow", np.array_equal(via_arrow(), x))}
        t, runs = interleaved(arms, repeats=3, budget_s=120)
        size = {name: path.stat().st_size / rows for name, path in paths.items()}
    header(f"per_row: Parquet, {rows:,} rows", f"text + {DIM}-d float32 embedding, write then read back, snappy; "
           f"median of {len(runs['arrow'])} interleaved repeats, {load_note()}")
    line("pandas list column (export's way)", f"{rows / t['pandas']:,.0f} rows/s, {size['pandas']:.0f} bytes/row, "
         f"round trip exact: {'yes' if same['pandas'] else 'NO'}")
    line("pyarrow fixed-size list", f"{rows / t['arrow']:,.0f} rows/s, {size['arrow']:.0f} bytes/row, "
         f"round trip exact: {'yes' if same['arrow'] else 'NO'}")
    line("speed-up arrow / pandas", f"{ratio(t['pandas'], t['arrow'])}x")


def run(opts: Options) -> None:
    sizes = QUICK if opts.quick else FULL
    print(f"== per_row: machine ==\n   {machine_note()}")
    texts, labels = demo_texts(sizes.encode)
    emb = encoding(load_minilm(), texts)
    first = np.unique(texts, return_index=True)[1]  # each distinct text once: the corpus before it repeats
    for rows in sizes.search:
        print()
        search(rows)
    print()
    maps(emb[first], np.asarray(labels)[first], sizes.map_rows)
    print()
    parquet(sizes.parquet)

