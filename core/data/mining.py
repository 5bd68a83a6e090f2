"""Label-aware example mining with a frozen reference model (docs/definitions.md, Example mining; seed 000).

For each training anchor, its nearest neighbours (cosine, FAISS) with the same label are positives and
its nearest neighbours with any other label are negatives (one-vs-rest, so any number of classes),
keeping only neighbours at cosine >= threshold. Similar-but-other-label negatives are what make the
margin matter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import faiss
import numpy as np
import pandas as pd

from core.errors import UserError
from core.models.encode import encode_cached
from core.models.loading import model_fingerprint
from core.storage import cached_frame, examples_entry, texts_hash

FORMATS = ("triplet", "contrastive", "mnrl", "cosine")
COLUMNS = {
    "triplet": ["anchor", "positive", "negative"],
    "contrastive": ["sentence1", "sentence2", "label"],  # label 1 = same class, 0 = other class
    "mnrl": ["anchor", "positive"],
    "cosine": ["sentence1", "sentence2", "score"],  # score 1.0 / 0.0, SetFit-style target cosine
}


@dataclass(frozen=True)
class MiningSettings:
    k: int = 5
    threshold: float = 0.5
    max_examples: int = 2000
    seed: int = 0

    def validate(self) -> None:
        if self.k < 1:
            raise UserError("Mining k must be at least 1.")
        if not -1.0 <= self.threshold <= 1.0:
            raise UserError("The similarity threshold is a cosine and must lie between -1 and 1.")
        if self.max_examples < 1:
            raise UserError("The number of examples must be at least 1.")


@dataclass
class Neighbours:
    """Per anchor: indices of qualifying same-label and other-label neighbours, nearest first."""

    positives: list[np.ndarray]
    negatives: list[np.ndarray]
    stats: dict = field(default_factory=dict)


@dataclass
class Examples:
    format: str
    frame: pd.DataFrame
    stats: dict

    def __len__(self) -> int:
        return len(self.frame)

    def to_dataset(self):
        from datasets import Dataset

        return Dataset.from_pandas(self.frame, preserve_index=False)


def unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def search_within(emb: np.ndarray, queries: np.ndarray, members: np.ndarray, k: int):
    """(cosines, row numbers) of each query's k nearest `members` rows of unit-length `emb`, nearest first; -1 where
    there are fewer."""
    index = faiss.IndexFlatIP(emb.shape[1])
    index.add(emb[members])
    sims, pos = index.search(emb[queries], min(k, len(members)))
    return sims, np.where(pos >= 0, members[np.clip(pos, 0, None)], -1)


def mine_neighbours(
    embeddings: np.ndarray, labels: np.ndarray, texts: list[str], settings: MiningSettings
) -> Neighbours:
    """Nearest same-label and other-label neighbours of every anchor, cosine >= threshold.

    An anchor's own row and rows with the identical text are never its neighbours.
    """
    settings.validate()
    emb = unit_rows(embeddings)
    labels = np.asarray(labels)
    n = len(labels)
    positives: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * n
    negatives: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * n
    extra = 4  # headroom for self and duplicate texts
    for cls in np.unique(labels):
        rows = np.flatnonzero(labels == cls)
        others = np.flatnonzero(labels != cls)
        p_sims, p_idx = search_within(emb, rows, rows, settings.k + extra)
        n_sims, n_idx = search_within(emb, rows, others, settings.k)
        for j, anchor in enumerate(rows):
            keep = (p_idx[j] >= 0) & (p_sims[j] >= settings.threshold) & (p_idx[j] != anchor)
            cand = [i for i in p_idx[j][keep] if texts[i] != texts[anchor]][: settings.k]
            positives[anchor] = np.asarray(cand, dtype=np.int64)
            negatives[anchor] = n_idx[j][(n_idx[j] >= 0) & (n_sims[j] >= settings.threshold)]
    no_pos = sum(len(p) == 0 for p in positives)
    no_neg = sum(len(q) == 0 for q in negatives)
    stats = {
        "anchors": n,
        "anchors_without_positive": no_pos,
        "anchors_without_negative": no_neg,
        "anchors_removed_by_threshold": sum(len(p) == 0 or len(q) == 0 for p, q in zip(positives, negatives)),
        "threshold": settings.threshold,
        "k": settings.k,
    }
    return Neighbours(positives, negatives, stats)


def _rows(fmt: str, texts: list[str], nb: Neighbours) -> list[tuple]:
    rows: list[tuple] = []
    for a, (pos, neg) in enumerate(zip(nb.positives, nb.negatives)):
        if fmt == "triplet":
            rows += [(texts[a], texts[p], texts[q]) for p, q in zip(pos, neg)]
        elif fmt == "mnrl":
            rows += [(texts[a], texts[p]) for p in pos]
        else:
            hi, lo = (1, 0) if fmt == "contrastive" else (1.0, 0.0)
            rows += [(texts[a], texts[p], hi) for p in pos] + [(texts[a], texts[q], lo) for q in neg]
    return rows


def _dedupe(fmt: str, rows: list[tuple]) -> list[tuple]:
    """Drop repeats; for pairs, (a, b) and (b, a) are the same example."""
    seen, out = set(), []
    for row in rows:
        key = row if fmt == "triplet" else (tuple(sorted(row[:2])) + row[2:])
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def build_examples(fmt: str, texts: list[str], nb: Neighbours, settings: MiningSettings) -> Examples:
    """Turn neighbours into one example format, deduplicated and subsampled deterministically."""
    if fmt not in FORMATS:
        raise UserError(f"Unknown example format '{fmt}'; choose one of {', '.join(FORMATS)}.")
    rows = _dedupe(fmt, _rows(fmt, texts, nb))
    available = len(rows)
    if available == 0:
        raise UserError(
            f"Mining found no {fmt} examples at cosine threshold {settings.threshold}; "
            "lower the threshold or raise k."
        )
    rng = np.random.default_rng(settings.seed)
    take = np.sort(rng.permutation(available)[: settings.max_examples])
    frame = pd.DataFrame([rows[i] for i in take], columns=COLUMNS[fmt])
    stats = dict(nb.stats, format=fmt, available=available, examples=len(frame))
    return Examples(fmt, frame, stats)


def mine(
    reference,
    texts: list[str],
    labels: np.ndarray,
    fmt: str,
    settings: MiningSettings = MiningSettings(),
    corpus_fp: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Examples:
    """Encode with the frozen reference (cached), mine, build; the result is cached per
    (corpus, reference, format, settings) so a sweep mines once."""
    model_fp = model_fingerprint(reference)
    settings_key = (settings.k, settings.threshold, settings.max_examples, settings.seed)
    path = examples_entry(corpus_fp or texts_hash(texts), model_fp, fmt, settings_key)

    def compute() -> tuple[pd.DataFrame, dict]:
        emb = encode_cached(reference, texts, fingerprint=model_fp, progress=progress)
        examples = build_examples(fmt, texts, mine_neighbours(emb, labels, texts, settings), settings)
        return examples.frame, examples.stats

    return Examples(fmt, *cached_frame(path, compute, COLUMNS[fmt]))


def active_share(ref_a: np.ndarray, ref_p: np.ndarray, ref_n: np.ndarray, margin: float,
                 distance: str = "cosine") -> float:
    """Share of triplets whose constraint d(a,p) + margin > d(a,n) is active under the reference model.

    Only active triplets produce gradient, so this is what a margin does before any training.
    """
    if distance == "cosine":
        a, p, q = unit_rows(ref_a), unit_rows(ref_p), unit_rows(ref_n)
        d_ap, d_an = 1 - (a * p).sum(1), 1 - (a * q).sum(1)
    else:
        d_ap, d_an = np.linalg.norm(ref_a - ref_p, axis=1), np.linalg.norm(ref_a - ref_n, axis=1)
    return float(np.mean(d_ap + margin > d_an))
