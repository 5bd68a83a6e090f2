"""The headline metrics of an evaluation result, named once for every table, card and model card."""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.evaluation.uncertainty import figure_interval

# How P@k / S@k weight the k neighbours (docs/definitions.md, P@k and S@k; core.evaluation.metrics.rank_weights):
# "linear" is seed 000's text, "none" (each 1/k) what its released evaluation code computes by default. Here, with
# the names of the figures, so the settings can offer it without loading the metrics' FAISS.
DISCOUNTS = ("linear", "none")


@dataclass(frozen=True)
class Metric:
    key: str  # in an evaluation result (core.evaluation.evaluate.score)
    short: str  # table rows and metric cards; {k} is the retrieval depth
    long: str  # model cards
    percent: bool  # an accuracy in [0, 1], shown x100 with '%'; P@k / S@k are already x100
    digits: int = 1  # decimals shown; a correlation in [-1, 1] needs more than a score out of 100

    def shown(self, value: float) -> float:
        return value * 100 if self.percent else value

    def rounded(self, value: float) -> float:
        """The value as shown: scaled and rounded to `digits`."""
        return round(self.shown(value), self.digits)

    def shown_change(self, before: float, after: float) -> float:
        """after - before as the two figures beside it read (79.2 - 77.2 = 2.0, even when the unrounded change
        is 2.06), in the shown unit."""
        return round(self.rounded(after) - self.rounded(before), self.digits)

    def range_text(self, result: dict) -> str:
        """The figure's 95% interval in `result` in the shown unit ("75.1–79.3", "53.2–73.5%"); "" where it has
        none."""
        bounds = figure_interval(result, self.key)
        if bounds is None:
            return ""
        low, high = (f"{self.shown(b):.{self.digits}f}" for b in bounds)
        return f"{low}–{high}{'%' if self.percent else ''}"

    def change_text(self, before: float, after: float) -> str:
        """The shown change with its sign and unit: an accuracy's in percentage points, "+1.2 pp", never "+1.2%",
        which would read as relative."""
        return f"{self.shown_change(before, after):+.{self.digits}f}{' pp' if self.percent else ''}"

    def interval_text(self, low: float | None, high: float | None) -> str:
        """A difference's interval in the shown unit, signed, a digit finer than the figures: "[+0.3, +2.1]"."""
        if low is None or high is None:
            return "[undefined]"
        scale, d = (100 if self.percent else 1), self.digits + 1
        return f"[{low * scale:+.{d}f}, {high * scale:+.{d}f}]"

    def difference_text(self, delta: float, low: float | None, high: float | None, p: float | None) -> str:
        """A paired difference (core.evaluation.paired) in the shown unit, with its 95% interval and p-value:
        "+1.2 pp [+0.3, +2.1], p = 0.012"; "+1.2 pp (too few items to judge)" where neither is given
        (core.evaluation.paired.MIN_ITEMS)."""
        scale, d = (100 if self.percent else 1), self.digits + 1
        shown = f"{delta * scale:+.{d}f}{' pp' if self.percent else ''}"
        if low is None and high is None and p is None:
            return f"{shown} (too few items to judge)"
        return f"{shown} {self.interval_text(low, high)}, {p_text(p)}"

    def text(self, value: float) -> str:
        """The value as tables and cards show it: scaled, rounded, with its unit (a change: change_text)."""
        shown = round(self.shown(value), self.digits) + 0.0  # + 0.0: a value that rounds to -0 shows as 0
        return f"{shown:.{self.digits}f}{'%' if self.percent else ''}"

    def shown_text(self, value: object) -> str:
        """text(value), or "–" where a run has no such figure (missing, NaN): what tables and cards print."""
        return self.text(value) if is_number(value) else "–"


def is_number(value: object) -> bool:
    """A finite int or float (not a bool): a figure a run recorded, as opposed to a missing or undefined one."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def intervals_text(result: dict, k: int | str = "k") -> str:
    """Every headline figure's 95% interval in `result`, for a line under its cards: "P@16 40.1–49.5 · kNN accuracy
    53.2–73.5%"; "" where it holds none."""
    return " · ".join(f"{m.short.format(k=k)} {text}" for m in HEADLINE if result.get(m.key) is not None
                      and (text := m.range_text(result)))


def p_text(p: float | None) -> str:
    """A p-value as a reader compares it with 0.05: three decimals, "p < 0.001" below that, "p n/a" when undefined."""
    if p is None:
        return "p n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


TRADE_OFF_ONLY = "scored by P@k and S@k only, as a quick point is"  # how the pages say that trade_off_only held


def trade_off_only(result: dict) -> bool:
    """Whether an evaluation result of a labelled corpus holds P@k and S@k alone (a quick point's: the settings'
    knn_train_max 0, core.evaluation.evaluate), so its kNN figures are missing by design, not lost."""
    return result.get("n_knn_train") == 0  # only a labelled corpus's result has a kNN training set


HEADLINE = (
    Metric("polarity", "P@{k}", "P@k (label agreement of retrieved texts)", False),
    Metric("similarity", "S@{k}", "S@k (reference-model similarity of retrieved texts)", False),
    Metric("knn_accuracy", "kNN accuracy", "kNN accuracy", True),
    Metric("linear_accuracy", "Linear probe", "Linear-probe accuracy", True),
    Metric("rerank_accuracy", "Reranking accuracy", "Reranking accuracy (positive above all four negatives)", True),
    Metric("sts_spearman", "STS Spearman", "STS Spearman (cosine vs gold score, x100)", False),
    Metric("ordering_accuracy", "Ordering accuracy", "Ordering accuracy (held-out lists in exactly their order)",
           True),
    Metric("kendall_tau", "Kendall tau", "Kendall tau (model order vs list order, mean over held-out lists)", False,
           digits=3),
)
