"""Is a difference between two evaluations of the same test items real? (docs/definitions.md, Paired comparisons)

Both evaluations scored the same items (target texts for P@k / S@k and kNN, scored pairs for STS Spearman, target
lists for the ordering metrics), so they are compared paired: each of RESAMPLES bootstrap resamples draws the items
with replacement ONCE and recomputes both figures on that draw, and the 95% interval of the difference (b - a) is
the percentiles of those differences. Item-to-item variation common to both models cancels, which is why the paired
interval of a difference is much narrower than the two figures' own intervals side by side.

The two-sided p-value is the bootstrap's: twice the smaller share of resampled differences on either side of zero
(at most 1). The interval's bounds are order statistics of the same sorted differences (the 25th smallest and the
25th largest of 1,000), so p < 0.05 exactly when the interval excludes 0, by construction rather than up to the
interpolation of a quantile. For kNN accuracy and exact order, which are shares of right / wrong items, McNemar's
exact test on the items that changed side is given beside it as a cross-check.

Only like is compared with like: the same items (matched by content, core.evaluation.items), the same judge of S@k,
the same k, discount and kNN metric; anything else is named in a note instead. Below MIN_ITEMS items no interval or
p-value is given, and below FEW_ITEMS a note says they are rough.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from core.data.table import FEW_TARGETS
from core.evaluation import items as per_item
from core.evaluation.headline import HEADLINE
from core.evaluation.uncertainty import LEVEL, RESAMPLES, SEED, resample_indices
from core.storage import cached_json, items_entry, result_entry

HEADLINE_BY_KEY = {m.key: m for m in HEADLINE}
VERSION = 4  # part of a stored comparison's key: raise it when what compare returns changes
MIN_ITEMS = 10  # fewer test items: no interval or p-value (one item "differs" with p < 0.001 otherwise)
FEW_ITEMS = FEW_TARGETS  # fewer: the interval and p-value are given with a note that they are rough

# A figure from one evaluation's per-item arrays at a batch of resamples: (r, n) item indices -> r values, in the
# units the result reports the figure in.
Statistic = Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]


def _mean(name: str, scale: float) -> Statistic:
    return lambda arrays, idx: arrays[name][idx].mean(axis=1) * scale


def _knn_right(arrays: dict[str, np.ndarray], idx: np.ndarray) -> np.ndarray:
    return (arrays["knn_pred"][idx] == arrays["knn_label"][idx]).mean(axis=1)


def _spearman(arrays: dict[str, np.ndarray], idx: np.ndarray) -> np.ndarray:
    """Spearman x 100 of cosine vs gold on each resample (ties share their mean rank, as scipy's spearmanr)."""
    from scipy.stats import rankdata  # scipy.stats takes 1 s to import: only when a difference is tested

    x = rankdata(arrays["sts_cos"][idx], axis=1)
    y = rankdata(arrays["sts_gold"][idx], axis=1)
    x -= x.mean(axis=1, keepdims=True)
    y -= y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # a resample of tied items only has no correlation
        return 100 * (x * y).sum(axis=1) / np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))


@dataclass(frozen=True)
class Figure:
    statistic: Statistic
    group: str  # the items it is computed over (core.evaluation.items.GROUPS)
    depends: tuple[str, ...] = ()  # the conditions (core.evaluation.items.conditions) it is computed under
    right: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None  # per-item right / wrong: McNemar applies


FIGURES: dict[str, Figure] = {  # every figure an evaluation reports that has per-item arrays, in result units
    "polarity": Figure(_mean("polarity", 100), "texts", ("k", "discount")),
    "similarity": Figure(_mean("similarity", 100), "texts", ("k", "discount", "judge")),
    "knn_accuracy": Figure(_knn_right, "texts", ("knn_k", "knn_metric"), lambda a: a["knn_pred"] == a["knn_label"]),
    "sts_spearman": Figure(_spearman, "pairs"),
    "ordering_accuracy": Figure(_mean("list_exact", 1), "lists", right=lambda a: a["list_exact"] > 0.5),
    "kendall_tau": Figure(_mean("list_tau", 1), "lists"),
    "rerank_accuracy": Figure(_mean("rerank_first", 1), "queries", right=lambda a: a["rerank_first"] > 0.5),
}
CONDITION_WORDS = {"k": "k", "discount": "rank discount", "knn_k": "the kNN vote's k", "knn_metric": "kNN metric"}
ITEM_WORDS = {"texts": ("test text", "test texts"), "pairs": ("test pair", "test pairs"),
              "lists": ("test list", "test lists"), "queries": ("test query", "test queries")}


@dataclass(frozen=True)
class Difference:
    name: str
    a: float
    b: float
    delta: float  # b - a
    ci_low: float
    ci_high: float
    p_value: float
    n: int  # items resampled
    mcnemar_p: float | None = None  # right / wrong figures only; like the interval, none below MIN_ITEMS items

    def as_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def paired_bootstrap(statistic: Statistic, a: dict[str, np.ndarray], b: dict[str, np.ndarray], n: int,
                     count: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> tuple[float, float, float]:
    """(ci_low, ci_high, p_value) of statistic(b) - statistic(a) over the same resampled items."""
    deltas = [statistic(b, idx) - statistic(a, idx) for idx in resample_indices(n, count, seed)]
    return interval_and_p(np.concatenate(deltas), level)


def interval_and_p(deltas: np.ndarray, level: float) -> tuple[float, float, float]:
    """The percentile interval and two-sided p-value of resampled differences (NaN ones, from a resample where the
    figure is undefined, left out); all NaN when too few are left to place both bounds.

    With R differences sorted and t = ceil(R (1 - level) / 2), the bounds are the t-th smallest and the t-th largest;
    p = 2 min(#(d <= 0), #(d >= 0)) / R. The low bound is above 0 exactly when at most t - 1 differences are <= 0,
    which is exactly when p < 1 - level on that side; so the two never disagree."""
    deltas = np.sort(deltas[np.isfinite(deltas)])
    r = len(deltas)
    t = max(1, math.ceil(round(r * (1 - level) / 2, 9)))
    if r < 2 * t:
        return math.nan, math.nan, math.nan
    p = min(1.0, 2 * min(int((deltas <= 0).sum()), int((deltas >= 0).sum())) / r)
    return float(deltas[t - 1]), float(deltas[r - t]), p


def mcnemar(right_a: np.ndarray, right_b: np.ndarray) -> float:
    """McNemar's exact two-sided p-value: of the items only one model gets right, is each model's share 1/2?"""
    from scipy.stats import binomtest

    only_a = int(np.sum(right_a & ~right_b))
    only_b = int(np.sum(~right_a & right_b))
    return 1.0 if only_a + only_b == 0 else float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


Arrays = tuple[dict[str, np.ndarray] | None, dict[str, np.ndarray] | None]  # two results' per-item arrays


def _arrays(a: dict, b: dict, arrays: Arrays | None) -> Arrays:
    """The two results' per-item arrays, each group in its canonical order, so item i is one item in both."""
    return arrays if arrays is not None else (per_item.load_canonical(a), per_item.load_canonical(b))


def figure_name(name: str, result: dict) -> str:
    """A figure as its evaluation names it: P@k and S@k with that evaluation's own k ("P@5")."""
    return HEADLINE_BY_KEY[name].short.format(k=result.get("k", "k"))


def _unlike(figure: Figure, a: dict, b: dict) -> str | None:
    """Why `figure` of results a and b is not one figure computed two ways (its conditions differ), or None."""
    cond_a, cond_b = per_item.conditions(a), per_item.conditions(b)
    if (cond_a is None) != (cond_b is None):
        return ("one evaluation was stored before test items were matched by their content; evaluate it again to "
                "compare")
    if cond_a is None:  # both older: their `of` held the corpus and settings, but not the judge of S@k
        judged = "judge" in figure.depends
        return "stored before S@k's judge was recorded; evaluate again to compare" if judged else None
    differ = [c for c in figure.depends if cond_a.get(c) != cond_b.get(c)]
    if "judge" in differ:
        names = (a.get("judge", "?"), b.get("judge", "?"))
        same = " (two models of one name)" if names[0] == names[1] else ""
        return (f"judged by different reference models ({names[0]} vs {names[1]}{same}); S@k measures closeness "
                "by its judge, so a change of judge is not a change of the model")
    if differ:
        return "computed with another " + " and ".join(
            f"{CONDITION_WORDS[c]} ({cond_a.get(c)} vs {cond_b.get(c)})" for c in differ)
    return None


def unlike(name: str, a: dict, b: dict) -> str | None:
    """Why figure `name` of results a and b may not be subtracted: computed under other conditions (k, discount,
    judge, kNN metric) or over other items; None where it may (also where a result is too old to say which items it
    scored). compare() asks it of every figure and the Runs page's A − B column too, so the page shows a difference
    only where the CLI computes one."""
    figure = FIGURES.get(name)
    if figure is None:  # no per-item arrays (the linear probe): nothing recorded to check
        return None
    if (why := _unlike(figure, a, b)) is not None:
        return why
    known = all(((r.get("items") or {}).get("of") or {}).get(figure.group) is not None for r in (a, b))
    if known and not per_item.same_items(a, b, figure.group):
        return f"the two evaluations scored different {figure.group}"
    return None


def _training_note(a: dict, b: dict, compared: list[Difference]) -> list[str]:
    """A note where compared text figures come from evaluations whose training sample differs (the kNN votes and the
    P@k pool are drawn from it)."""
    cond_a, cond_b = per_item.conditions(a) or {}, per_item.conditions(b) or {}
    texts = [d for d in compared if FIGURES[d.name].group == "texts"]
    if not texts or cond_a.get("train") == cond_b.get("train"):
        return []
    return ["same test texts, other training texts: the kNN votes and the P@k pool of each come from its own "
            "training split"]


def _size_note(name: str, n: int, group: str) -> str | None:
    """Why a difference over n items has no interval (below MIN_ITEMS) or a rough one (below FEW_ITEMS)."""
    one, many = ITEM_WORDS[group]
    items = f"{n} {one if n == 1 else many}"
    if n < MIN_ITEMS:
        return f"{name}: n = {items}: too few to judge a difference (no interval or p-value below {MIN_ITEMS})"
    if n < FEW_ITEMS:
        return f"{name}: only {items}: its interval and p-value are rough ({FEW_ITEMS} or more make them dependable)"
    return None


def compare(a: dict, b: dict, count: int = RESAMPLES, seed: int = SEED, arrays: Arrays | None = None
            ) -> tuple[list[Difference], list[str]]:
    """The paired differences b - a of every figure both evaluation results report on the same items under the same
    conditions, and a note for each figure both report that is not compared (other items, another judge, k,
    discount or kNN metric, no per-item arrays kept) or whose items are few; `arrays`: the two results' per-item
    arrays where the caller has read them already."""
    arrays_a, arrays_b = _arrays(a, b, arrays)
    out, notes = [], []
    for name, figure in FIGURES.items():
        if a.get(name) is None or b.get(name) is None:
            continue
        shown = figure_name(name, a) if a.get("k") == b.get("k") else f"{figure_name(name, a)} / {figure_name(name, b)}"
        if (why := unlike(name, a, b)) is not None:
            notes.append(f"{shown} not compared: {why}")
            continue
        if arrays_a is None or arrays_b is None:
            notes.append(f"{shown} not compared: per-item figures are not kept for "
                         f"{'both evaluations' if arrays_a is None and arrays_b is None else 'one evaluation'} "
                         "(evaluated before they were, or the cache was cleared); evaluate again to compare")
            continue
        n = len(next(v for k, v in arrays_a.items() if per_item.GROUPS[k] == figure.group))
        va, vb = float(a[name]), float(b[name])
        if (note := _size_note(shown, n, figure.group)) is not None:
            notes.append(note)
        if n < MIN_ITEMS:
            out.append(Difference(name, va, vb, vb - va, math.nan, math.nan, math.nan, n))
            continue
        low, high, p = paired_bootstrap(figure.statistic, arrays_a, arrays_b, n, count, seed)
        exact = None if figure.right is None else mcnemar(figure.right(arrays_a), figure.right(arrays_b))
        out.append(Difference(name, va, vb, vb - va, low, high, p, n, exact))
    return out, notes + _training_note(a, b, out)


def class_differences(a: dict, b: dict, count: int = RESAMPLES, seed: int = SEED, level: float = LEVEL,
                      arrays: Arrays | None = None) -> list[dict]:
    """Per class (in the order of the evaluations' class codes): its test texts' kNN recall and P@k, b - a, each with
    its paired 95% interval and p-value, resampling the test texts as the headline figures do (a resample holds a
    varying number of each class; one holding none of a class leaves it out). The floors of a whole comparison
    apply to each class (`size`, class_size): no interval below MIN_ITEMS of its texts, "rough" below FEW_ITEMS.
    Empty without per-item arrays of the same test texts, or without the kNN votes of both (a trade-off-only
    evaluation has none); `arrays` as in compare."""
    arrays_a, arrays_b = _arrays(a, b, arrays)
    if (arrays_a is None or arrays_b is None or not per_item.same_items(a, b, "texts")
            or any("knn_pred" not in arrays for arrays in (arrays_a, arrays_b))  # a trade-off-only evaluation
            or _unlike(FIGURES["knn_accuracy"], a, b) or _unlike(FIGURES["polarity"], a, b)
            or len(arrays_a["knn_label"]) < MIN_ITEMS):
        return []
    labels = arrays_a["knn_label"]
    right = {"a": arrays_a["knn_pred"] == labels, "b": arrays_b["knn_pred"] == labels}
    polarity = {"a": arrays_a["polarity"] * 100, "b": arrays_b["polarity"] * 100}
    classes = np.unique(labels)
    deltas: dict[tuple[int, str], list[np.ndarray]] = {(c, m): [] for c in classes for m in ("recall", "polarity")}
    for idx in resample_indices(len(labels), count, seed):
        drawn = labels[idx]
        for c in classes:
            mask = drawn == c
            held = mask.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                for metric, values in (("recall", right), ("polarity", polarity)):
                    mean = {w: (values[w][idx] * mask).sum(axis=1) / held for w in ("a", "b")}
                    deltas[(c, metric)].append(mean["b"] - mean["a"])
    out = []
    for c in classes:
        n = int((labels == c).sum())
        row: dict = {"code": int(c), "n": n, "size": class_size(n)}
        for metric in ("recall", "polarity"):
            bounds = ((math.nan,) * 3 if n < MIN_ITEMS  # one flipped vote would read as p < 0.001
                      else interval_and_p(np.concatenate(deltas[(c, metric)]), level))
            row[metric] = {k: (None if math.isnan(v) else v) for k, v in zip(("ci_low", "ci_high", "p_value"), bounds)}
        out.append(row)
    return out


def class_size(n: int) -> str | None:
    """Whether a class's n test texts can carry a paired difference, by the same floors as a whole comparison:
    "too few" below MIN_ITEMS (no interval or p-value), "rough" below FEW_ITEMS, None otherwise."""
    return "too few" if n < MIN_ITEMS else "rough" if n < FEW_ITEMS else None


def compared(a: dict, b: dict) -> dict:
    """compare(a, b) as JSON ({"metrics": [Difference.as_dict()], "notes": [...], "classes": class_differences}),
    stored in the result cache under both evaluations' item references, so every page, card and table that shows
    this difference reads one computation. A comparison missing per-item arrays is not stored: evaluating again
    brings them back."""
    refs = [(r.get("items") or {}).get("ref") for r in (a, b)]

    def compute() -> dict:
        arrays = (per_item.load_canonical(a), per_item.load_canonical(b))  # read once for every figure and class
        diffs, notes = compare(a, b, arrays=arrays)
        return {"metrics": [d.as_dict() for d in diffs], "notes": notes,
                "classes": class_differences(a, b, arrays=arrays)}

    if None in refs or not all(items_entry(ref).exists() for ref in refs):
        return compute()
    return cached_json(result_entry(["paired", VERSION, *refs, RESAMPLES, SEED]), compute)


def change_texts(a: dict | None, b: dict | None) -> dict[str, str]:
    """Per figure key, b - a as tables show it with its paired interval and p-value ("+1.2 pp [+0.3, +2.1],
    p = 0.012"); empty where either result is missing."""
    if not a or not b:
        return {}
    return {d["name"]: HEADLINE_BY_KEY[d["name"]].difference_text(d["delta"], d["ci_low"], d["ci_high"], d["p_value"])
            for d in compared(a, b)["metrics"]}
