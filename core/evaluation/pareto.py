"""The Pareto front of (P@k, S@k) points: the runs no other run beats on both scores."""

from __future__ import annotations

import math


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated (P, S) points, maximising both, sorted by P (then S descending).

    A point is dominated when another is at least as good on both scores and better on one, so exact
    duplicates both stay on the front. Points with a NaN score (a failed evaluation) are never on it.
    """
    valid = [i for i, (p, s) in enumerate(points) if not (math.isnan(p) or math.isnan(s))]

    def dominated(i: int) -> bool:
        p, s = points[i]
        return any(q >= p and t >= s and (q > p or t > s) for q, t in (points[j] for j in valid))

    front = [i for i in valid if not dominated(i)]
    return sorted(front, key=lambda i: (points[i][0], -points[i][1], i))
