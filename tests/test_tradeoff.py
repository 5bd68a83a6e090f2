"""Pareto front of the P@k / S@k trade-off : maximise both scores."""

import math

from core.evaluation.pareto import pareto_front


def test_front_drops_dominated_points_and_sorts_by_polarity():
    points = [(63.0, 46.6), (80.6, 35.2), (81.3, 29.6), (70.0, 30.0), (80.0, 35.0)]
    # (70, 30) is dominated by (80.6, 35.2); so is (80, 35).
    assert pareto_front(points) == [0, 1, 2]


def test_ties_and_duplicates():
    # Equal P: the higher S dominates. Exact duplicates dominate neither each other, so both stay.
    assert pareto_front([(50.0, 10.0), (50.0, 20.0)]) == [1]
    assert pareto_front([(50.0, 20.0), (60.0, 10.0), (50.0, 20.0)]) == [0, 2, 1]
    assert pareto_front([(1.0, 1.0), (1.0, 1.0), (0.5, 0.5)]) == [0, 1]


def test_single_empty_and_nan():
    assert pareto_front([]) == []
    assert pareto_front([(10.0, 10.0)]) == [0]
    assert pareto_front([(math.nan, 99.0), (10.0, 10.0), (99.0, math.nan)]) == [1]


def test_one_point_dominating_everything():
    assert pareto_front([(1.0, 2.0), (3.0, 4.0), (2.0, 3.0), (3.0, 1.0)]) == [1]
