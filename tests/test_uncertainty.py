"""The intervals of P@k and S@k (core.evaluation.uncertainty): the bootstrap CI against a bootstrap written out as a
loop, the standard error against its formula, degenerate inputs, what an evaluation stores, and the fall-back for a
run stored before the intervals were kept."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest

from core.evaluation.metrics import polarity_similarity
from core.evaluation.uncertainty import (
    ERROR_BARS,
    RESAMPLES,
    bootstrap_mean_ci,
    interval,
    se_from_sd,
    standard_error,
    target_intervals,
)


def loop_bootstrap(values: np.ndarray, rng: np.random.Generator, resamples: int, level: float = 0.95
                   ) -> tuple[float, float]:
    """The textbook percentile bootstrap, one resample at a time: n targets drawn with replacement, their mean."""
    means = []
    for _ in range(resamples):
        sample = values[rng.choice(len(values), size=len(values), replace=True)]
        means.append(sample.mean())
    return tuple(np.quantile(means, [(1 - level) / 2, (1 + level) / 2]))


@pytest.fixture(scope="module")
def skewed() -> np.ndarray:
    """Per-target P-like values: many exact 0s and 1s and some in between, as a real evaluation gives."""
    rng = np.random.default_rng(3)
    return np.concatenate([np.zeros(40), np.ones(90), rng.random(70)])


def test_ci_matches_a_direct_bootstrap_loop(skewed):
    low, high = bootstrap_mean_ci(skewed, seed=7)
    loop_low, loop_high = loop_bootstrap(skewed, np.random.default_rng(7), RESAMPLES)
    # Different draws, so Monte-Carlo noise only: with 20,000 resamples each the
    # endpoints agree to a few hundredths of a standard error; a 90 % interval would be 0.3 standard errors off.
    se = standard_error(skewed)
    many_low, many_high = bootstrap_mean_ci(skewed, resamples=20_000, seed=1)
    ref_low, ref_high = loop_bootstrap(skewed, np.random.default_rng(2), 20_000)
    assert abs(many_low - ref_low) < 0.12 * se and abs(many_high - ref_high) < 0.12 * se
    # and the default 1,000 resamples are within their own Monte-Carlo error of the loop
    assert abs(low - loop_low) < 0.5 * se and abs(high - loop_high) < 0.5 * se
    assert low < skewed.mean() < high


def test_ci_is_reproducible_chunked_like_unchunked_and_honours_the_level(skewed, monkeypatch):
    assert bootstrap_mean_ci(skewed) == bootstrap_mean_ci(skewed)  # fixed seed
    import core.evaluation.uncertainty as uncertainty

    whole = bootstrap_mean_ci(skewed, resamples=300)
    monkeypatch.setattr(uncertainty, "_CHUNK_VALUES", 7 * len(skewed))  # 7 resamples per chunk, 43 chunks
    assert bootstrap_mean_ci(skewed, resamples=300) == pytest.approx(whole, abs=1e-12)
    narrow, wide = bootstrap_mean_ci(skewed, level=0.5), bootstrap_mean_ci(skewed, level=0.99)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


def test_ci_of_a_large_normal_sample_is_the_normal_interval():
    x = np.random.default_rng(0).normal(10.0, 2.0, 5000)
    low, high = bootstrap_mean_ci(x)
    z = NormalDist().inv_cdf(0.975)
    se = standard_error(x)
    assert low == pytest.approx(x.mean() - z * se, abs=0.1 * se)
    assert high == pytest.approx(x.mean() + z * se, abs=0.1 * se)


def test_standard_error_is_the_sample_sd_over_root_n():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    mean = x.mean()
    expected = math.sqrt(sum((v - mean) ** 2 for v in x) / 3) / 2
    assert standard_error(x) == pytest.approx(expected)
    # from a stored numpy standard deviation (divided by n) the same number comes back
    assert se_from_sd(float(x.std()), len(x)) == pytest.approx(expected)


@pytest.mark.parametrize("values", [[], [0.7], [0.5, math.nan, 0.2], [0.1, math.inf]])
def test_degenerate_inputs_give_nan_not_an_error(values):
    assert math.isnan(standard_error(values))
    assert all(math.isnan(v) for v in bootstrap_mean_ci(values))


def test_constant_values_have_a_zero_width_interval():
    assert standard_error([0.25] * 30) == 0.0
    assert bootstrap_mean_ci([0.25] * 30) == pytest.approx((0.25, 0.25))
    assert math.isnan(se_from_sd(3.0, 1)) and math.isnan(se_from_sd(None, 100)) and math.isnan(se_from_sd(3.0, None))


def test_an_evaluation_stores_the_intervals_of_its_per_target_scores_in_json():
    rng = np.random.default_rng(5)
    targets, pool = rng.normal(size=(60, 8)), rng.normal(size=(300, 8))
    score = polarity_similarity(targets, pool, targets, pool, rng.integers(0, 3, 60), rng.integers(0, 3, 300), k=5)
    kept = target_intervals(score.target_polarity, score.target_similarity)
    assert set(score.as_dict()) == {"polarity", "polarity_sd", "similarity", "similarity_sd", "k", "discount",
                                    "n_queries", "n_pool"}  # the per-target arrays never reach a run's row
    assert kept["polarity_se"] == pytest.approx(standard_error(score.target_polarity * 100))
    assert kept["similarity_ci"] == pytest.approx(list(bootstrap_mean_ci(score.target_similarity * 100)))
    low, high = kept["polarity_ci"]
    assert low < score.polarity < high
    assert len(json.dumps(kept)) < 300  # a few numbers per run


def test_interval_per_choice_and_the_fall_back_for_an_old_run():
    new = {"polarity": 60.0, "polarity_sd": 22.0, "n_queries": 101,
           "uncertainty": {"polarity_se": 2.1, "polarity_ci": [55.5, 64.0]}}
    assert interval(new, "polarity", "sd") == (38.0, 82.0, False)
    assert interval(new, "polarity", "se") == pytest.approx((57.9, 62.1, False))
    assert interval(new, "polarity", "ci") == (55.5, 64.0, False)  # asymmetric, as stored

    old = {"polarity": 60.0, "polarity_sd": 22.0, "n_queries": 101}  # no "uncertainty": stored before
    se = 22.0 / 10  # sd / sqrt(n - 1)
    assert interval(old, "polarity", "se") == pytest.approx((60 - se, 60 + se, False))
    low, high, approximate = interval(old, "polarity", "ci")
    assert approximate and (high - low) / 2 == pytest.approx(1.959964 * se)
    assert (high - low) / 2 < 22.0  # never the standard deviation shown as a CI
    nothing = interval({"polarity": 60.0}, "polarity", "ci")
    assert math.isnan(nothing.low) and math.isnan(nothing.high)
    with pytest.raises(ValueError, match="unknown error bars"):
        interval(new, "polarity", "95")
    assert list(ERROR_BARS)[0] == "ci"  # the default
