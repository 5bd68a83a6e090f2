"""Where did a run get worse? The test items whose score changed between two evaluations of the same items, read
from their per-item arrays (core.evaluation.items), never by encoding again.

- labelled texts: the texts whose kNN prediction flipped, right -> wrong first, then wrong -> right, each with its
  nearest kNN reference texts before and after;
- pairs: every scored pair by how much its rank error grew (the distance between where the cosine and where the
  gold score rank it, as a share of the pairs), the worst first;
- lists: the lists that lost their exact order, then those that gained it, then the rest by how much their Kendall
  tau fell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.data.corpus import Corpus
from core.data.kinds import kind_of
from core.data.lists import ListCorpus
from core.data.pairs import PairCorpus
from core.evaluation import items as per_item

WORSE, BETTER = "right → wrong", "wrong → right"
KEPT_RIGHT, KEPT_WRONG = "right both", "wrong both"
FLIPS = (WORSE, BETTER, KEPT_RIGHT, KEPT_WRONG)  # a test text's kNN outcome before -> after, worst first


def flip_status(right_before: np.ndarray, right_after: np.ndarray) -> np.ndarray:
    """Per test text, which of FLIPS its kNN outcome went through."""
    return np.select([right_before & ~right_after, ~right_before & right_after, right_before],
                     [WORSE, BETTER, KEPT_RIGHT], KEPT_WRONG)


def _neighbours(corpus: Corpus, rows: np.ndarray) -> list[str]:
    return [" | ".join(corpus.train_texts[i] for i in row) for row in rows]


def text_flips(before: dict[str, np.ndarray], after: dict[str, np.ndarray], corpus: Corpus) -> pd.DataFrame:
    """The test texts whose kNN prediction flipped, right -> wrong first, with label, both predictions and both
    neighbourhoods."""
    right_b = before["knn_pred"] == before["knn_label"]
    right_a = after["knn_pred"] == after["knn_label"]
    status = flip_status(right_b, right_a)
    rows = np.concatenate([np.flatnonzero(status == WORSE), np.flatnonzero(status == BETTER)])
    classes = np.asarray(corpus.classes, dtype=object)
    return pd.DataFrame({
        "change": status[rows], "text": [corpus.test_texts[i] for i in rows],
        "label": classes[before["knn_label"][rows]], "predicted before": classes[before["knn_pred"][rows]],
        "predicted after": classes[after["knn_pred"][rows]],
        "neighbours before": _neighbours(corpus, before["knn_neighbours"][rows]),
        "neighbours after": _neighbours(corpus, after["knn_neighbours"][rows]),
    })


def rank_error(cosine: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Per pair, |rank of its cosine - rank of its gold score| / number of pairs (ties averaged): 0 where the model
    puts the pair where the gold score does, up to 1."""
    from scipy.stats import rankdata  # 1 s to import: only for a table of pairs

    return np.abs(rankdata(cosine) - rankdata(gold)) / len(cosine)


def pair_changes(before: dict[str, np.ndarray], after: dict[str, np.ndarray], pairs: PairCorpus) -> pd.DataFrame:
    """Every scored pair with its cosine and rank error before and after, the one whose error grew most first."""
    err_b, err_a = rank_error(before["sts_cos"], before["sts_gold"]), rank_error(after["sts_cos"], after["sts_gold"])
    order = np.argsort(-(err_a - err_b), kind="stable")
    return pd.DataFrame({  # the figures first: long texts would push them out of a table's view
        "change": (err_a - err_b)[order], "rank error before": err_b[order], "rank error after": err_a[order],
        "gold score": before["sts_gold"][order], "cosine before": before["sts_cos"][order],
        "cosine after": after["sts_cos"][order], "text1": np.asarray(pairs.test.text1, dtype=object)[order],
        "text2": np.asarray(pairs.test.text2, dtype=object)[order],
    })


def list_changes(before: dict[str, np.ndarray], after: dict[str, np.ndarray], lists: ListCorpus) -> pd.DataFrame:
    """Every target list: those that lost their exact order first, then those that gained it, then by tau's fall."""
    lost = (before["list_exact"] > 0.5) & (after["list_exact"] <= 0.5)
    gained = (before["list_exact"] <= 0.5) & (after["list_exact"] > 0.5)
    fall = after["list_tau"] - before["list_tau"]
    order = np.lexsort((fall, ~gained, ~lost))
    members = lists.test.lists
    return pd.DataFrame({
        "change": np.select([lost, gained], ["lost its order", "gained its order"], "")[order],
        "tau before": before["list_tau"][order], "tau after": after["list_tau"][order], "tau change": fall[order],
        "anchor": [members[i][0] for i in order], "members": [" | ".join(members[i][1:]) for i in order],
    })


CHANGES = {"texts": text_flips, "pairs": pair_changes, "lists": list_changes}  # by the per-item arrays' group
NEEDS = {"texts": "knn_pred", "pairs": "sts_cos"}  # the array a group's table reads, missing from some results


def changed_items(before: dict, after: dict, corpus) -> pd.DataFrame | None:
    """The items of `corpus`'s target split as they changed between two evaluation results of it (before, after):
    text_flips, pair_changes or list_changes by the group of items its kind is scored on; None where either result
    kept no per-item arrays (or no kNN votes: a trade-off-only evaluation), the two scored other items, or the kind's
    items have no table of changes."""
    kind = kind_of(corpus)
    group = kind.unit
    arrays_b, arrays_a = per_item.load(before), per_item.load(after)
    if (group not in CHANGES or arrays_b is None or arrays_a is None
            or not per_item.same_items(before, after, group)):
        return None
    first = next((a for name, a in arrays_b.items() if per_item.GROUPS.get(name) == group), None)
    if first is None or len(first) != kind.targets(corpus):  # the file changed since the run evaluated it
        return None
    needs = NEEDS.get(group)
    if needs is not None and (needs not in arrays_b or needs not in arrays_a):
        return None
    return CHANGES[group](arrays_b, arrays_a, corpus)
