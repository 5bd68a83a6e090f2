"""Per-class results of an evaluation: P@k, kNN recall and the kNN confusion matrix per class, from the per-target
P values and kNN predictions the evaluation already computes (docs/definitions.md, "P@k and S@k", "kNN accuracy").

A headline figure averages over the targets, so a small class barely moves it: TREC's ABBR has 9 of 500 test
questions. Per class, such a class's figures rest on few texts, which the table flags.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from core.evaluation.headline import p_text
from core.evaluation.paired import FEW_ITEMS, MIN_ITEMS, compared

CHANGE_CI = "change 95% CI, p"  # the column suffix of a change's paired interval and p-value
RECALL_CI = f"kNN recall {CHANGE_CI}"
SMALL_CLASS = 20  # fewer test texts than this: one text moves the class's kNN recall by more than 5 points
MAX_CONFUSION_CLASSES = 50  # a larger matrix is neither readable nor small enough to store with every run


def _plain(value: object) -> object:
    """A label as JSON writes it: numpy scalars become Python ones (json.dumps refuses numpy.int64)."""
    return value.item() if isinstance(value, np.generic) else value


def per_class(
    target_labels: Sequence,
    predicted: Sequence,
    polarity: np.ndarray,
    classes: Sequence,
    k: int,
    knn_k: int,
) -> dict:
    """JSON-ready per-class figures of one evaluation.

    `target_labels` and `predicted` (the kNN classifier's labels) are the targets' labels, of any type compared
    by equality; `polarity` is each target's P in [0, 1]; `classes` lists every class in display order. Returns
    {"k", "knn_k", "classes": [{"class", "n", "polarity", "polarity_sd", "knn_recall"}], "confusion"}: P x100 as
    the headline P@k, recall in [0, 1], None where a class has no targets; "confusion" holds the counts (rows: true
    class, columns: predicted, in `classes` order), or None above MAX_CONFUSION_CLASSES classes.
    """
    classes = [_plain(c) for c in classes]
    position = {c: i for i, c in enumerate(classes)}
    if len(position) != len(classes):
        raise ValueError("classes must not repeat")
    try:
        true = np.array([position[_plain(v)] for v in target_labels], dtype=np.int64)
        pred = np.array([position[_plain(v)] for v in predicted], dtype=np.int64)
    except KeyError as missing:
        raise ValueError(f"label {missing.args[0]!r} is not one of the classes") from None
    polarity = np.asarray(polarity, dtype=np.float64) * 100
    if not len(true) == len(pred) == len(polarity) > 0:
        raise ValueError("target_labels, predicted and polarity must have one entry per target, and there must be "
                         "targets")
    if not np.isfinite(polarity).all():
        raise ValueError("polarity must be finite")
    from sklearn.metrics import confusion_matrix  # 1.2 s to import: not for commands that read no classes

    counts = confusion_matrix(true, pred, labels=np.arange(len(classes)))
    n = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):  # a class without targets has no mean: None below
        mean = np.bincount(true, weights=polarity, minlength=len(classes)) / n
        sd = np.sqrt(np.bincount(true, weights=(polarity - mean[true]) ** 2, minlength=len(classes)) / n)  # ddof 0
    rows = [{"class": c, "n": int(n[i]),
             "polarity": float(mean[i]) if n[i] else None,
             "polarity_sd": float(sd[i]) if n[i] else None,
             "knn_recall": float(counts[i, i] / n[i]) if n[i] else None} for i, c in enumerate(classes)]
    return {"k": int(k), "knn_k": int(knn_k), "classes": rows,
            "confusion": counts.tolist() if len(classes) <= MAX_CONFUSION_CLASSES else None}


def _rows(result: dict | None) -> pd.DataFrame | None:
    """One evaluation's per-class rows indexed by class, or None when it has none (recorded before they were)."""
    data = (result or {}).get("per_class")
    if not data:
        return None
    frame = pd.DataFrame(data["classes"], columns=["class", "n", "polarity", "polarity_sd", "knn_recall"])
    frame["class"] = frame["class"].astype(str)
    return frame.set_index("class").astype({"polarity": float, "polarity_sd": float, "knn_recall": float})


def per_class_frame(before: dict | None, after: dict | None = None) -> pd.DataFrame:
    """The per-class table of an evaluation result (`evaluate`'s dict), or of a run's results before and after
    training: class, n test texts, P@k (and its sd), kNN recall in %, and with both results the changes (P@k
    points, recall in percentage points); `few` flags classes with fewer than SMALL_CLASS test texts. Empty when
    neither result holds per-class data (one recorded before per-class results were)."""
    b, a = _rows(before), _rows(after)
    if b is None and a is None:
        return pd.DataFrame()
    p = f"P@{(after if a is not None else before)['per_class']['k']}"
    if b is None or a is None:
        only = b if a is None else a
        frame = pd.DataFrame({"n": only["n"], p: only["polarity"], f"{p} sd": only["polarity_sd"],
                              "kNN recall": only["knn_recall"] * 100})
    else:
        index = b.index.union(a.index, sort=False)  # the same corpus gives the same classes; stay safe if not
        b, a = b.reindex(index), a.reindex(index)
        frame = pd.DataFrame({
            "n": a["n"].fillna(b["n"]).astype(int),
            f"{p} before": b["polarity"], f"{p} after": a["polarity"], f"{p} change": a["polarity"] - b["polarity"],
            f"{p} sd before": b["polarity_sd"], f"{p} sd after": a["polarity_sd"],
            "kNN recall before": b["knn_recall"] * 100, "kNN recall after": a["knn_recall"] * 100,
            "kNN recall change": (a["knn_recall"] - b["knn_recall"]) * 100,
        })
        paired = _paired_columns(before, after, p)
        for column, values in paired.items():
            frame[column] = [values.get(str(c), "–") for c in frame.index]
    frame["few"] = frame["n"] < SMALL_CLASS
    return frame.rename_axis("class").reset_index()


def _paired_columns(before: dict, after: dict, p: str) -> dict[str, dict[str, str]]:
    """Per-class changes' paired 95% intervals and p-values (core.evaluation.paired.class_differences), as text by
    class name: "[+0.8, +4.1], p = 0.004" for P@k (points) and kNN recall (percentage points)."""
    names = [str(row["class"]) for row in after["per_class"]["classes"]]
    columns = {"polarity": (f"{p} {CHANGE_CI}", 1), "recall": (RECALL_CI, 100)}
    out: dict[str, dict[str, str]] = {column: {} for column, _ in columns.values()}
    for row in compared(before, after).get("classes", []):
        if row["code"] >= len(names):
            continue
        size = row["size"]
        for metric, (column, scale) in columns.items():
            d = row[metric]
            if size == "too few":
                out[column][names[row["code"]]] = f"n = {row['n']}: too few to judge (fewer than {MIN_ITEMS})"
            elif d["ci_low"] is not None:
                out[column][names[row["code"]]] = (f"[{d['ci_low'] * scale:+.1f}, {d['ci_high'] * scale:+.1f}], "
                                                   f"{p_text(d['p_value'])}"
                                                   + (f" (rough: n = {row['n']} < {FEW_ITEMS})" if size else ""))
    return out if any(out.values()) else {}


def confusion_counts(result: dict | None) -> tuple[list[str], np.ndarray] | None:
    """(class names, counts) of an evaluation result's kNN confusion matrix, or None when it has none."""
    data = (result or {}).get("per_class") or {}
    if data.get("confusion") is None:
        return None
    return [str(row["class"]) for row in data["classes"]], np.asarray(data["confusion"], dtype=np.int64)
