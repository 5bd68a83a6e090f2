"""Multi-granularity hard negatives (docs/definitions.md, Multi-granularity hard negatives; seed 004).

Every anchor gets one positive per row (a nearest same-label text, as for MNRL pairs) and four negatives, one per
difficulty band of the frozen reference model's cosine rank among texts of OTHER labels: N1 = ranks 1-5 (hardest),
N2 = 6-20, N3 = 21-50, N4 = 51-100 (easiest) by default. One FAISS search per class finds the 100 nearest
other-label texts; one is drawn per band (seeded).

Why not sentence-transformers' ``mine_hard_negatives``: it excludes only the given positive, not every text of the
anchor's label, so a same-label text could become a negative; making it label-aware would take one call per class
and band (24 on TREC), each re-searching the corpus. The per-class search below is the one mining already uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.data.mining import Examples, MiningSettings, mine_neighbours, search_within, unit_rows
from core.errors import UserError, shorten
from core.models.encode import encode_cached
from core.models.loading import model_fingerprint
from core.storage import cached_frame, examples_entry, texts_hash

EDGES = (5, 20, 50, 100)  # last rank of N1..N4
TEXT_COLUMNS = ["anchor", "positive", "n1", "n2", "n3", "n4"]
COSINE_COLUMNS = ["c1", "c2", "c3", "c4"]


def parse_edges(value: str | Sequence[int]) -> tuple[int, int, int, int]:
    """Four increasing last ranks ("5,20,50,100"), or a UserError saying what is wrong."""
    items = value.split(",") if isinstance(value, str) else list(value)
    try:
        edges = tuple(int(str(v).strip()) for v in items)
    except ValueError:
        edges = ()
    if len(edges) != 4 or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])) or edges[-1] > 10_000:
        raise UserError(f"bands must be four increasing whole numbers from 1 to 10000, the last rank of N1..N4 "
                        f"(e.g. 5,20,50,100), got {shorten(value)}")
    return edges  # type: ignore[return-value]


def band_ranges(edges: Sequence[int]) -> list[tuple[int, int]]:
    """Each band's ranks as 0-based [start, stop) positions in the nearest-first list."""
    starts = (0, *edges[:-1])
    return list(zip(starts, edges))


@dataclass(frozen=True)
class BandSettings:
    edges: tuple[int, int, int, int] = EDGES
    positives: MiningSettings = MiningSettings()  # k nearest same-label texts at cosine >= threshold; N; seed


def band_negatives(emb: np.ndarray, labels: np.ndarray, texts: Sequence[str], edges: Sequence[int],
                   seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosines), each (n, 4): one other-label text per band for every anchor, drawn uniformly (seed) among
    the band's ranks; -1 / NaN where a band has no candidate. A text identical to the anchor's is never drawn."""
    emb = unit_rows(emb)
    labels = np.asarray(labels)
    text_ids = pd.factorize(pd.Series(list(texts), dtype=object))[0]
    n, depth = len(labels), edges[-1]
    cand = np.full((n, depth), -1, dtype=np.int64)
    sims = np.full((n, depth), np.nan, dtype=np.float32)
    for cls in np.unique(labels):
        rows, others = np.flatnonzero(labels == cls), np.flatnonzero(labels != cls)
        if not len(others):
            continue
        found_sims, found = search_within(emb, rows, others, depth)
        cand[rows, : found.shape[1]], sims[rows, : found.shape[1]] = found, found_sims
    valid = cand >= 0
    valid &= text_ids[np.clip(cand, 0, None)] != text_ids[:, None]
    rng = np.random.default_rng(seed)
    rows_out = np.full((n, 4), -1, dtype=np.int64)
    cos_out = np.full((n, 4), np.nan, dtype=np.float32)
    for band, (start, stop) in enumerate(band_ranges(edges)):
        draw = np.where(valid[:, start:stop], rng.random((n, stop - start)), -1.0)
        pick = start + draw.argmax(1)
        has = draw.max(1) >= 0
        rows_out[has, band], cos_out[has, band] = cand[has, pick[has]], sims[has, pick[has]]
    return rows_out, cos_out


def build_banded(texts: list[str], labels: np.ndarray, emb: np.ndarray, settings: BandSettings) -> Examples:
    """One row per (anchor, positive) with the anchor's four band negatives and their reference cosines,
    subsampled deterministically to N; anchors lacking a positive or a band are left out and counted."""
    pos = mine_neighbours(emb, labels, texts, settings.positives).positives
    neg, cos = band_negatives(emb, labels, texts, settings.edges, settings.positives.seed)
    complete = (neg >= 0).all(1)
    anchors = [a for a in range(len(texts)) if len(pos[a]) and complete[a]]
    if not anchors:
        short = int((~complete).sum())
        raise UserError(f"No anchor has both a same-label positive at cosine >= {settings.positives.threshold:g} and "
                        f"a negative in every band ({short:,} of {len(texts):,} anchors have fewer than "
                        f"{settings.edges[-1]} other-label texts); lower the band edges or the threshold.")
    rows = [(a, p) for a in anchors for p in pos[a]]
    rng = np.random.default_rng(settings.positives.seed)
    take = np.sort(rng.permutation(len(rows))[: settings.positives.max_examples])
    chosen = [rows[i] for i in take]
    a_idx = np.array([a for a, _p in chosen])
    frame = pd.DataFrame({"anchor": [texts[a] for a in a_idx], "positive": [texts[p] for _a, p in chosen],
                          **{f"n{b + 1}": [texts[i] for i in neg[a_idx, b]] for b in range(4)},
                          **{f"c{b + 1}": cos[a_idx, b] for b in range(4)}})
    stats = {"format": "banded", "anchors": len(texts), "anchors_used": len(set(a_idx.tolist())),
             "anchors_without_positive": int(sum(len(p) == 0 for p in pos)),
             "anchors_without_band": int((~complete).sum()), "available": len(rows), "examples": len(frame),
             "edges": list(settings.edges), "threshold": settings.positives.threshold, "k": settings.positives.k,
             "band_cosine": [round(float(frame[c].mean()), 4) for c in COSINE_COLUMNS]}
    return Examples("banded", frame, stats)


def mine_bands(reference, texts: list[str], labels: np.ndarray, settings: BandSettings,
               corpus_fp: str | None = None, progress: Callable[[int, int], None] | None = None) -> Examples:
    """Encode with the frozen reference (cached) and mine the bands once per (corpus, reference, settings)."""
    model_fp = model_fingerprint(reference)
    p = settings.positives
    path = examples_entry(corpus_fp or texts_hash(texts), model_fp, "banded",
                          (*settings.edges, p.k, p.threshold, p.max_examples, p.seed))

    def compute() -> tuple[pd.DataFrame, dict]:
        emb = encode_cached(reference, texts, fingerprint=model_fp, progress=progress)
        examples = build_banded(texts, labels, emb, settings)
        return examples.frame, examples.stats

    return Examples("banded", *cached_frame(path, compute, TEXT_COLUMNS + COSINE_COLUMNS))
