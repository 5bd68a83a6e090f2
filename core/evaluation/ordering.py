"""Ordering metrics of a list corpus (docs/definitions.md, Ordering metrics): does the model rank each list's
members, by cosine to the list's anchor, in the list's own order?"""

from __future__ import annotations

import numpy as np
from scipy.stats import kendalltau

from core.data.lists import ListCorpus, ListSplit
from core.data.mining import unit_rows
from core.models.encode import encode_cached


def ordering_scores(similarities: list[np.ndarray]) -> dict:
    """From each list's anchor-to-member cosines (members in list order, most related first): the share of lists
    whose order the cosines reproduce exactly, and the mean Kendall tau-b between cosine order and list order."""
    exact, taus = [], []
    for sims in similarities:
        sims = np.asarray(sims, dtype=np.float64)
        exact.append(bool(np.all(np.diff(sims) < 0)))  # strictly decreasing: a tie does not reproduce an order
        tau = kendalltau(-np.arange(len(sims)), sims).statistic
        taus.append(0.0 if np.isnan(tau) else float(tau))  # all cosines equal: no order at all
    return {"ordering_accuracy": float(np.mean(exact)), "kendall_tau": float(np.mean(taus)), "n_lists": len(exact)}


def list_texts(split: ListSplit) -> list[str]:
    """The distinct texts of a split's lists, in first-seen order: what one ordering evaluation encodes."""
    return list(dict.fromkeys(t for members in split.lists for t in members))


def list_similarities(model, split: ListSplit, progress=None) -> list[np.ndarray]:
    """Cosine of each list's anchor to each of its members, every distinct text encoded once (through the cache)."""
    texts = list_texts(split)
    emb = encode_cached(model, texts, progress=progress)
    emb = unit_rows(emb)
    row = {t: i for i, t in enumerate(texts)}
    out = []
    for members in split.lists:
        vectors = emb[[row[t] for t in members]]
        out.append(vectors[1:] @ vectors[0])
    return out


def ordering_metrics(model, lists: ListCorpus, progress=None) -> dict:
    """Ordering accuracy and Kendall tau on the target lists."""
    out = ordering_scores(list_similarities(model, lists.test, progress))
    out["list_split"] = lists.target_split
    return out


def evaluate_lists(model, lists: ListCorpus, model_name: str, progress=None) -> dict:
    """What a list corpus is judged by, shaped like evaluate()'s result."""
    return {"kind": "lists", "model": model_name, "target_split": lists.target_split,
            **ordering_metrics(model, lists, progress)}
