"""How sure a run's P@k and S@k are (docs/definitions.md, P@k and S@k): the standard error and a bootstrap 95%
confidence interval of the mean over targets, and the error bars the Trade-off plot draws from them.

The standard deviation over targets (about 22 points for P) says how much single texts differ, not how well the
mean is known, so it swamps every difference between runs; the interval of the mean is what two runs are judged
by. The bootstrap needs the per-target values, which only exist while an evaluation runs: `target_intervals`
computes the intervals then, and the run keeps those few numbers (never the per-target arrays) under
"uncertainty" in its metrics. Runs evaluated before that fall back to what they stored (`interval`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000
SEED = 0
_CHUNK_VALUES = 2_000_000  # resampled values held at once: 16 MB of indices, whatever the number of targets

# The Trade-off plot's error-bar choices, default first.
ERROR_BARS = {
    "ci": "95% CI of the mean (bootstrap)",
    "se": "standard error of the mean",
    "sd": "standard deviation over targets",
}


class Interval(NamedTuple):
    low: float
    high: float
    approximate: bool = False  # a 95% CI from the normal approximation: the run stored no bootstrap interval


def standard_error(values: np.ndarray) -> float:
    """Standard error of the mean: the sample standard deviation (n - 1) over sqrt(n). NaN for fewer than two
    values or any non-finite one: one target says nothing about how the mean varies."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2 or not np.isfinite(x).all():
        return math.nan
    return float(x.std(ddof=1) / math.sqrt(len(x)))


def bootstrap_mean_ci(values: np.ndarray, level: float = LEVEL, resamples: int = RESAMPLES,
                      seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean: `resamples` means of n values drawn with replacement (resample
    i is the i-th `integers(0, n, n)` of default_rng(seed), so two metrics of the same targets resample the same
    targets), and their (1 - level) / 2 and (1 + level) / 2 quantiles. NaN for fewer than two values or any
    non-finite one."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n < 2 or not np.isfinite(x).all():
        return math.nan, math.nan
    means = np.concatenate([x[idx].mean(axis=1) for idx in resample_indices(n, resamples, seed)])
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def resample_indices(n: int, count: int = RESAMPLES, seed: int = SEED) -> Iterator[np.ndarray]:
    """The bootstrap's item indices in (r, n) batches of at most _CHUNK_VALUES: resample i is the i-th
    `integers(0, n, n)` of default_rng(seed), so every figure of the same items (one result's, or two compared
    paired: core.evaluation.paired) draws the same items."""
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_VALUES // max(n, 1))
    for done in range(0, count, chunk):
        yield rng.integers(0, n, (min(chunk, count - done), n))


def target_intervals(target_polarity: np.ndarray, target_similarity: np.ndarray) -> dict:
    """What a run keeps of its per-target P and S (each in [0, 1]): their standard errors and bootstrap CIs, x100
    like the scores."""
    out: dict = {"level": LEVEL, "resamples": RESAMPLES}
    for name, values in (("polarity", target_polarity), ("similarity", target_similarity)):
        scaled = np.asarray(values, dtype=np.float64) * 100
        out[f"{name}_se"] = standard_error(scaled)
        out[f"{name}_ci"] = list(bootstrap_mean_ci(scaled))
    return out


def _z(level: float) -> float:
    return NormalDist().inv_cdf((1 + level) / 2)


def proportion_ci(share: float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a share of n independent yes / no outcomes (an accuracy over n test texts, the
    share of lists ordered exactly): unlike mean ± z SE it stays inside [0, 1] near 0 and 1. NaN for n < 1 or a
    share outside [0, 1]."""
    if n < 1 or not 0.0 <= share <= 1.0:
        return math.nan, math.nan
    z = _z(level)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def spearman_ci(rho: float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Interval of a Spearman correlation over n pairs, rho and the interval x 100 as STS figures are: Fisher's
    z = atanh(rho) with Bonett and Wright's (2000) variance (1 + rho^2 / 2) / (n - 3), which keeps the coverage
    of Spearman's rho close to the nominal level. NaN for n < 4 or |rho| >= 100."""
    r = rho / 100
    if n < 4 or not abs(r) < 1:
        return math.nan, math.nan
    half = _z(level) * math.sqrt((1 + r * r / 2) / (n - 3))
    z = math.atanh(r)
    return 100 * math.tanh(z - half), 100 * math.tanh(z + half)


def json_interval(bounds: tuple[float, float]) -> list[float | None]:
    """An interval as JSON holds it: an undefined bound (too few items) is null, never NaN."""
    return [None if math.isnan(v) else v for v in bounds]


def figure_interval(result: dict, key: str) -> tuple[float, float] | None:
    """A figure's 95% interval as an evaluation result holds it, in the figure's own unit: `<key>_ci`
    (core.evaluation.corpus_eval.with_intervals), or, for P@k and S@k of a result stored before that, the one under
    "uncertainty"; None where there is none or a bound is undefined (too few items)."""
    bounds = result.get(f"{key}_ci")
    if bounds is None and isinstance(result.get("uncertainty"), dict):
        bounds = result["uncertainty"].get(f"{key}_ci")
    if not isinstance(bounds, list | tuple) or len(bounds) != 2:
        return None
    try:
        low, high = float(bounds[0]), float(bounds[1])
    except (TypeError, ValueError):
        return None
    return (low, high) if math.isfinite(low) and math.isfinite(high) else None


def se_from_sd(sd: float | None, n: int | None) -> float:
    """The standard error from a stored standard deviation over n targets (numpy's, divided by n), so runs stored
    without their intervals still get an exact one; NaN when either is missing or n < 2."""
    if sd is None or n is None or n < 2:
        return math.nan
    return float(sd) / math.sqrt(n - 1)


def interval(metrics: dict, metric: str, bars: str) -> Interval:
    """The error bar of `metric` ("polarity" or "similarity") in an evaluation result, as `bars` (ERROR_BARS) asks.
    A result stored before intervals were kept gets its standard error from its standard deviation, and a 95% CI
    from the normal approximation (mean ± 1.96 SE), marked approximate: never its standard deviation."""
    if bars not in ERROR_BARS:
        raise ValueError(f"unknown error bars {bars!r}; choose one of {', '.join(ERROR_BARS)}")
    mean = float(metrics[metric])
    sd = metrics.get(f"{metric}_sd")
    if bars == "sd":
        half = math.nan if sd is None else float(sd)
        return Interval(mean - half, mean + half)
    stored = metrics.get("uncertainty") or {}
    se = stored.get(f"{metric}_se", se_from_sd(sd, metrics.get("n_queries")))
    se = math.nan if se is None else float(se)
    if bars == "se":
        return Interval(mean - se, mean + se)
    ci = stored.get(f"{metric}_ci")
    if ci is not None:
        low, high = (math.nan if v is None else float(v) for v in ci)
        return Interval(low, high)
    half = _z(LEVEL) * se
    return Interval(mean - half, mean + half, approximate=True)
