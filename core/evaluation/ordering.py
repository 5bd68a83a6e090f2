"""Ordering metrics of a list corpus (docs/definitions.md, Ordering metrics): does the model rank each list's
members, by cosine to an anchor, in the list's own order? Scored on the rows a ListMLE run trains: anchor 0 of a
star list, every anchor of a chain list (over the members after it, the order the list states)."""

from __future__ import annotations

import numpy as np

from core.data.lists import ListCorpus, ListSplit
from core.data.mining import unit_rows
from core.evaluation.items import ITEMS, ITEMS_OF, canonical
from core.models.encode import encode_cached


def ordered_rows(sims: np.ndarray, shape: str) -> list[np.ndarray]:
    """The rows of one list's similarity matrix (members in list order) whose order the list states: anchor 0's
    cosines to members 1.. for a star list; for a chain list each anchor's cosines to the members after it, for the
    anchors with at least two of them (one alone is always in order)."""
    anchors = [0] if shape == "star" else range(len(sims) - 2)
    return [sims[i, i + 1:] for i in anchors]


def in_order(rows: list[np.ndarray]) -> bool:
    """Every row strictly decreasing: a tie does not reproduce an order."""
    return all(bool(np.all(np.diff(row) < 0)) for row in rows)


def list_scores(similarities: list[list[np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Each list's score from its ordered rows (ordered_rows): 1 where the cosines reproduce every row's order
    exactly, else 0; and the mean Kendall tau-b between each row's cosine order and the list order."""
    from scipy.stats import kendalltau  # 1 s to import: not for a figure read from the cache

    exact, taus = [], []
    for rows in similarities:
        exact.append(in_order(rows))
        row_taus = [kendalltau(-np.arange(len(row)), row).statistic for row in rows]
        taus.append(float(np.mean([0.0 if np.isnan(t) else t for t in row_taus])))  # all cosines equal: no order
    return np.asarray(exact, dtype=np.float64), np.asarray(taus, dtype=np.float64)


def ordering_scores(similarities: list[list[np.ndarray]]) -> dict:
    """The share of lists in exact order and the mean over lists of their Kendall tau (list_scores)."""
    exact, taus = list_scores(similarities)
    return {"ordering_accuracy": float(np.mean(exact)), "kendall_tau": float(np.mean(taus)), "n_lists": len(exact)}


def list_texts(split: ListSplit) -> list[str]:
    """The distinct texts of a split's lists, in first-seen order: what one ordering evaluation encodes."""
    return list(dict.fromkeys(t for members in split.lists for t in members))


def list_similarities(model, split: ListSplit, shape: str, progress=None) -> list[list[np.ndarray]]:
    """Each list's ordered rows (ordered_rows) of the model's cosines, every distinct text encoded once (through the
    cache)."""
    texts = list_texts(split)
    emb = encode_cached(model, texts, progress=progress)
    emb = unit_rows(emb)
    row = {t: i for i, t in enumerate(texts)}
    out = []
    for members in split.lists:
        vectors = emb[[row[t] for t in members]]
        out.append(ordered_rows(vectors @ vectors.T, shape))
    return out


def ordering_metrics(model, lists: ListCorpus, progress=None) -> dict:
    """Ordering accuracy and Kendall tau on the target lists, on the rows their shape orders, with each list's
    scores kept for paired comparisons (core.evaluation.items)."""
    exact, taus = list_scores(list_similarities(model, lists.test, lists.shape, progress))
    key, order = canonical("lists", [tuple(members) for members in lists.test.lists], lists.shape)
    return {"ordering_accuracy": float(np.mean(exact)), "kendall_tau": float(np.mean(taus)), "n_lists": len(exact),
            "list_split": lists.target_split, "list_shape": lists.shape,
            ITEMS: {"list_exact": exact, "list_tau": taus, **order}, ITEMS_OF: {"lists": key}}


def evaluate_lists(model, lists: ListCorpus, model_name: str, progress=None) -> dict:
    """What a list corpus is judged by, shaped like evaluate()'s result."""
    return {"kind": "lists", "model": model_name, "target_split": lists.target_split,
            **ordering_metrics(model, lists, progress)}
