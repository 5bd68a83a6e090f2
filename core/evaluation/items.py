"""What each test item scored in an evaluation, kept so two evaluations of the same items can be compared item by
item (core.evaluation.paired: paired intervals and tests; the texts whose kNN prediction flipped) without encoding
anything again.

A computation hands its per-item arrays to `evaluate_corpus` under ITEMS; they are stored beside the cached result as
one cache entry, and the result keeps only a reference to them (`result["items"]`): the run store, whose rows every
page reads, never holds per-item arrays. Each array belongs to a GROUP of items (the labelled corpus's test texts,
the scored pairs, the target lists); the result records which items each group holds (`of`), so arrays are only
ever compared with arrays of the same items.
"""

from __future__ import annotations

import numpy as np

from core.storage import items_entry, load_arrays, save_arrays

ITEMS = "_items"  # where a computation hands its arrays to evaluate_corpus (never stored in the result)
ITEMS_OF = "_items_of"  # and which items each group holds
GROUPS = {  # per-item array: the group of items it has one value for
    "polarity": "texts",  # P of each target text, in [0, 1]
    "similarity": "texts",  # S of each target text, in [0, 1]
    "knn_pred": "texts",  # the kNN vote's class code
    "knn_label": "texts",  # the text's own class code
    "knn_neighbours": "texts",  # its NEIGHBOURS nearest kNN reference texts, as train-split row indices
    "sts_cos": "pairs",  # the model's cosine of each scored pair
    "sts_gold": "pairs",  # its gold score
    "list_exact": "lists",  # 1 where every ordered row of the list is in order
    "list_tau": "lists",  # the list's mean Kendall tau
}
NEIGHBOURS = 3  # nearest neighbours kept per test text: enough to show why a prediction flipped


def save(ref: str, arrays: dict[str, np.ndarray]) -> None:
    unknown = set(arrays) - set(GROUPS)
    if unknown:
        raise ValueError(f"no group for per-item arrays {sorted(unknown)}")
    save_arrays(items_entry(ref), {name: np.asarray(a) for name, a in arrays.items()})


def load(result: dict) -> dict[str, np.ndarray] | None:
    """The per-item arrays of an evaluation result, or None where it has none (computed before they were kept) or
    its cache entry is gone."""
    ref = (result.get("items") or {}).get("ref")
    return load_arrays(items_entry(ref)) if ref else None


def same_items(a: dict, b: dict, group: str) -> bool:
    """Whether two results' arrays of `group` describe the same items, in the same order."""
    of_a, of_b = ((r.get("items") or {}).get("of") or {} for r in (a, b))
    return of_a.get(group) is not None and of_a.get(group) == of_b.get(group)
