"""How good generated training data is before anything trains on it, judged by an independent frozen embedding model
(the reference model): seed 003's lists should drift from their anchor step by step (the cosine to the anchor falls
with the position), seed 004's negatives should fall in similarity to the query, N1 > N2 > N3 > N4, below the
positive (the paper's Table 4, with another model: PUBLISHED_NEGATIVES), and no generated text should be a test text.

The measures take `embed` (texts -> (n, d) embeddings; `reference_embed(model)` for a SentenceTransformer, through
the disk cache) and call it once, on the distinct texts. A cosine with a zero or non-finite embedding has no value:
it is skipped and counted, never averaged. Every report is JSON-able: an interval is a two-element list, None where a
figure is undefined (no value, or one value for an interval), never NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from core.data.table import LEAK_EXAMPLES, leak_text
from core.errors import UserError
from core.evaluation.uncertainty import LEVEL, bootstrap_mean_ci, json_interval, proportion_ci
from core.generation.negatives import NEGATIVES

Embed = Callable[[list[str]], np.ndarray]
ROLES = ("positive", *(f"N{k}" for k in range(1, NEGATIVES + 1)))  # a negatives row's texts besides its query
# Seed 004's Table 4: mean cosine to the query of N1..N4 under another embedding model than ours.
PUBLISHED_NEGATIVES = {"N1": 0.881, "N2": 0.857, "N3": 0.845, "N4": 0.793}


def reference_embed(model) -> Embed:
    """`embed` for a SentenceTransformer: its pooled embeddings through the disk cache (encode_cached), so measuring
    a file again encodes nothing."""
    from core.models.encode import encode_cached  # torch: only where a model runs, not to read a report

    return lambda texts: encode_cached(model, texts)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of a (n, d) or (1, d) and b (n, d); NaN where either vector has no direction (zero or
    non-finite), so an undefined cosine can be told from a real 0 and skipped."""
    a, b = _unit(a), _unit(b)
    return np.clip(np.sum(a * b, axis=-1), -1.0, 1.0)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(x, axis=-1, keepdims=True)
        return np.where(np.isfinite(norms) & (norms > 0), x / norms, np.nan)


def _embedded(texts: Sequence[str], embed: Embed) -> tuple[dict[str, int], np.ndarray]:
    """Each distinct text embedded once, in one call: (row of each text, embeddings)."""
    distinct = list(dict.fromkeys(texts))
    emb = np.asarray(embed(distinct), dtype=np.float64)
    if emb.ndim != 2 or len(emb) != len(distinct):
        raise ValueError(f"embed gave an array of shape {emb.shape} for {len(distinct)} texts, not (n, d)")
    return {text: i for i, text in enumerate(distinct)}, emb


def _mean_figure(values: np.ndarray) -> dict:
    """A mean with its bootstrap 95% interval and n; None where there is no value."""
    values = np.asarray(values, dtype=np.float64)
    return {"mean": float(values.mean()) if len(values) else None, "ci": json_interval(bootstrap_mean_ci(values)),
            "n": len(values)}


def _share_figure(flags: np.ndarray) -> dict:
    """A share of yes / no outcomes with its Wilson 95% interval, n and the count of yes; None where n is 0."""
    flags = np.asarray(flags, dtype=bool)
    n, count = len(flags), int(flags.sum())
    share = count / n if n else None
    return {"share": share, "ci": json_interval(proportion_ci(share if n else 0.0, n)), "n": n, "count": count}


def _measurable(cosine_counts: Sequence[int]) -> None:
    if not cosine_counts:
        raise UserError("There are no lists to measure: the file holds no rows of list_id, rank and text.")
    if not any(cosine_counts):
        raise UserError(f"None of the {len(cosine_counts):,} lists has a member after its anchor, so nothing can be "
                        "measured; generate longer lists.")


def list_report(per_list: Sequence[np.ndarray]) -> dict:
    """The quality of ranked lists from each list's cosines to its anchor (positions 2, 3, ...; NaN where undefined):
    per position the mean over the lists that reach it; per list Kendall's tau of position against cosine (-1: the
    list drifts away exactly in its order); the share of lists whose cosines fall strictly. A list needs two defined
    cosines (three members) and not all equal for a tau; lists with the anchor alone are skipped; all counted."""
    from scipy.stats import kendalltau  # 1 s to import: only when lists are measured

    _measurable([len(values) for values in per_list])
    by_position: dict[int, list[float]] = {}
    taus: list[float | None] = []
    falling: list[bool] = []
    skipped = {"anchor_only": 0, "undefined_cosines": 0, "no_tau_short": 0, "no_tau_constant": 0}
    for values in per_list:
        values = np.asarray(values, dtype=np.float64)
        defined = np.isfinite(values)
        positions, kept = np.arange(2, len(values) + 2)[defined], values[defined]
        skipped["anchor_only"] += not len(values)
        skipped["undefined_cosines"] += int((~defined).sum())
        for position, value in zip(positions.tolist(), kept.tolist()):
            by_position.setdefault(position, []).append(value)
        tau = None
        if len(kept) < 2:
            skipped["no_tau_short"] += bool(len(values))
        else:
            falling.append(bool(np.all(np.diff(kept) < 0)))
            if np.ptp(kept) == 0:
                skipped["no_tau_constant"] += 1
            else:
                tau = float(kendalltau(positions, kept).statistic)
        taus.append(tau)
    defined_taus = np.array([t for t in taus if t is not None])
    return {
        "level": LEVEL,
        "lists": len(per_list),
        "positions": [{"position": p, **_mean_figure(np.array(by_position[p]))} for p in sorted(by_position)],
        "tau": {**_mean_figure(defined_taus), "per_list": taus},
        "monotone": _share_figure(np.array(falling)),
        "skipped": skipped,
    }


def list_quality(lists: Sequence[Sequence[str]], embed: Embed) -> dict:
    """list_report of lists of texts (each in rank order, the anchor first), every distinct text embedded once (an
    anchor alone not at all)."""
    _measurable([max(len(members) - 1, 0) for members in lists])
    row, emb = _embedded([text for members in lists if len(members) > 1 for text in members], embed)
    per_list = [cosines(emb[[row[members[0]]]], emb[[row[text] for text in members[1:]]]) if len(members) > 1
                else np.empty(0) for members in lists]
    return list_report(per_list)


def negatives_report(cos: np.ndarray) -> dict:
    """The quality of graded negatives from cos (rows, 1 + NEGATIVES): each row's cosine to its query of the positive
    and of N1..N4 (NaN where undefined). The mean of each over the rows where it is defined (seed 004's Table 4);
    the share of rows ordered N1 > N2 > N3 > N4 (rows with all four defined), and of rows with the positive above
    N1."""
    cos = np.asarray(cos, dtype=np.float64)
    if cos.ndim != 2 or cos.shape[1] != len(ROLES):
        raise ValueError(f"cosines of shape {cos.shape}, not (rows, {len(ROLES)})")
    if not len(cos):
        raise UserError("There are no rows to measure: the file holds no query with its positive and negatives.")
    defined = np.isfinite(cos)
    negatives, full = cos[:, 1:], defined[:, 1:].all(axis=1)
    both = defined[:, :2].all(axis=1)
    return {
        "level": LEVEL,
        "rows": len(cos),
        "means": {role: _mean_figure(column[ok]) for role, column, ok in zip(ROLES, cos.T, defined.T)},
        "ordered": _share_figure(np.all(np.diff(negatives[full], axis=1) < 0, axis=1)),
        "positive_above_n1": _share_figure(cos[both, 0] > cos[both, 1]),
        "undefined_cosines": int((~defined).sum()),
    }


def negatives_quality(rows: Sequence[tuple[str, str, Sequence[str]]], embed: Embed) -> dict:
    """negatives_report of (query, positive, [N1..N4]) rows, every distinct text embedded once."""
    if not rows:
        raise UserError("There are no rows to measure: the file holds no query with its positive and negatives.")
    for number, (_, _, negatives) in enumerate(rows, 1):
        if len(negatives) != NEGATIVES:
            raise UserError(f"Row {number:,} has {len(negatives)} negatives, not {NEGATIVES} (negative_1 to "
                            f"negative_{NEGATIVES}, hardest first).")
    row, emb = _embedded([text for query, positive, negatives in rows for text in (query, positive, *negatives)],
                         embed)
    queries = emb[[row[query] for query, _, _ in rows]]
    texts = [(positive, *negatives) for _, positive, negatives in rows]
    cos = np.column_stack([cosines(queries, emb[[row[t[j]] for t in texts]]) for j in range(len(ROLES))])
    return negatives_report(cos)


def leakage(generated: Sequence[str], test_texts: Sequence[str]) -> dict:
    """How many generated texts are test texts, compared as the corpus leakage checks compare (leak_text: case,
    spacing and accents aside): training on them would score the test by memory. Up to LEAK_EXAMPLES distinct
    examples."""
    test = {leak_text(text) for text in test_texts}
    leaked = [text for text in generated if leak_text(text) in test]
    return {"leaked": len(leaked), "of": len(generated), "examples": list(dict.fromkeys(leaked))[:LEAK_EXAMPLES]}
