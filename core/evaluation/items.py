"""What each test item scored in an evaluation, kept so two evaluations of the same items can be compared item by
item (core.evaluation.paired: paired intervals and tests; the texts whose kNN prediction flipped) without encoding
anything again.

A computation hands its per-item arrays to `evaluate_corpus` under ITEMS; they are stored beside the cached result as
one cache entry, and the result keeps only a reference to them (`result["items"]`): the run store, whose rows every
page reads, never holds per-item arrays. Each array belongs to a GROUP of items (the labelled corpus's test texts,
the scored pairs, the target lists); the result records which items each group holds (`of`: a hash of the items'
content as a set, whatever their order and the training rows beside them; an array `<group>_order` lists them
canonically), so arrays are only ever compared with arrays of the same items, lined up item by item, and the
settings a figure also depends on (`conditions`: k, discount, the kNN metric, the judge of S@k, the training
sample), so two figures computed another way are never compared as if they were one.
"""

from __future__ import annotations

import numpy as np

from core.storage import items_entry, key_hash, load_arrays, save_arrays

ITEMS = "_items"  # where a computation hands its arrays to evaluate_corpus (never stored in the result)
ITEMS_OF = "_items_of"  # and which items each group holds
CONDITIONS = "_conditions"  # and what else its figures depend on
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
    "rerank_first": "queries",  # 1 where the query's positive outranks all its negatives
    # the group's items in canonical order
    **{f"{group}_order": group for group in ("texts", "pairs", "lists", "queries")},
}
# Results whose `of` names items by content carry it as items["content"]; 2: as a set (canonical), with each group's
# order, so the same items in another row order (a pair's texts either way round) are the same items.
CONTENT_VERSION = 2
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


def canonical(group: str, items: list, *context: object) -> tuple[str, dict[str, np.ndarray]]:
    """A group's items (texts with their labels, pairs with their scores, lists with their members; `context` beside
    them, a list shape) named by their content as a set, and the array `<group>_order` that lists them canonically:
    two evaluations of the same items in another row order match, and load_canonical lines their arrays up item by
    item."""
    order = np.array(sorted(range(len(items)), key=items.__getitem__), dtype=np.int64)
    return key_hash(["items", CONTENT_VERSION, *context, [items[i] for i in order]]), {f"{group}_order": order}


def load_canonical(result: dict) -> dict[str, np.ndarray] | None:
    """load(result) with each group's arrays in its canonical order (`<group>_order`): what two evaluations of the
    same items are compared by, whatever order their corpora held the items in."""
    arrays = load(result)
    if arrays is None:
        return None
    out = dict(arrays)
    for name, values in arrays.items():
        order = arrays.get(f"{GROUPS[name]}_order")
        if order is not None and not name.endswith("_order"):
            out[name] = np.asarray(values)[order]
    return out


def same_items(a: dict, b: dict, group: str) -> bool:
    """Whether two results' arrays of `group` describe the same items (in any order: load_canonical lines them up)."""
    of_a, of_b = ((r.get("items") or {}).get("of") or {} for r in (a, b))
    return of_a.get(group) is not None and of_a.get(group) == of_b.get(group)


def conditions(result: dict) -> dict | None:
    """What a result's figures depend on beside their items (k, discount, knn_k, knn_metric, judge, train); None for a
    result stored before items were named by content, whose `of` cannot be matched with a newer one's."""
    items = result.get("items") or {}
    return items.get("conditions") if items.get("content") == CONTENT_VERSION else None
