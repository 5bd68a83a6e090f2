"""Reranking accuracy on a negatives file's target rows (core.data.negatives): the share of queries whose positive
has a higher cosine than each of its four negatives, with each query's outcome kept for paired comparisons
(core.evaluation.items, group "queries")."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from core.evaluation.items import ITEMS, ITEMS_OF, canonical

Row = tuple[str, str, Sequence[str]]  # query, positive, negatives hardest first


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def rerank_metrics(rows: Sequence[Row], encode: Callable[[list[str], str], np.ndarray]) -> dict:
    """Reranking accuracy, n_queries and the mean cosine of the positive and of each negative to the query;
    `encode(texts, phase)` gives the model's embeddings (three calls: queries, positives, negatives)."""
    k = len(rows[0][2]) if rows else 0
    q = _unit(encode([r[0] for r in rows], "encoding the queries"))
    p = _unit(encode([r[1] for r in rows], "encoding the positives"))
    n = _unit(encode([t for r in rows for t in r[2]], "encoding the negatives")).reshape(len(rows), k, -1)
    positive = np.einsum("ij,ij->i", q, p)
    negative = np.einsum("ij,ikj->ik", q, n)
    first = (positive[:, None] > negative).all(axis=1).astype(np.float64)
    key, order = canonical("queries", [(r[0], r[1], tuple(r[2])) for r in rows])
    return {"rerank_accuracy": float(first.mean()), "n_queries": len(rows),
            "positive_cosine": round(float(positive.mean()), 4),
            "negative_cosine": [round(float(c), 4) for c in negative.mean(axis=0)],
            ITEMS: {"rerank_first": first, **order}, ITEMS_OF: {"queries": key}}
