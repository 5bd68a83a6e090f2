"""Issue 26, as properties: pair and list files that cannot mean what they say (identical texts on all or some rows,
a handful of scored target pairs, scores at float32's limits, list members repeated), read through the public
loader, are either refused with a one-line UserError for a reason that holds, or loaded unchanged with the report
warning that says so: never an uncaught exception, never a silent change. Loaders only, no model."""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.data.kinds import load_any
from core.data.lists import MIN_LISTS, ListCorpus
from core.data.pairs import FEW_SCORED_PAIRS, MIN_SCORED_PAIRS, SAME_TEXT_REFUSED, PairCorpus
from core.data.table import HOLDOUT_FRACTION, MIN_ROWS
from core.errors import UserError

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXTS = (".csv", ".jsonl", ".parquet")
F32_MAX = float(np.finfo(np.float32).max)
SCORES = st.one_of(
    st.floats(-5, 5),
    st.sampled_from([F32_MAX, -F32_MAX, 3.5e38, -3.5e38, 1e39, -1e300, 1.7976931348623157e308,  # float32's edge
                     1.0, 1.0 + 1e-10, 1.0 + 2e-10, 1e-46, 2e-46, 0.0, -0.0]),  # equal once float32
    st.floats(allow_nan=False, allow_infinity=False))


def load(df: pd.DataFrame, ext: str):
    """The corpus load_any reads from `df` written as a file of type `ext`."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"f{ext}"
        if ext == ".csv":
            df.to_csv(path, index=False)
        elif ext == ".jsonl":
            path.write_text("\n".join(json.dumps(row) for row in df.to_dict("records")), encoding="utf-8")
        else:
            df.to_parquet(path, index=False)
        return load_any(path)


def refused_or_loaded(df: pd.DataFrame, ext: str, reasons: list[str]):
    """The corpus, or None when it was refused in one line for one of `reasons` (regexes of the reasons that hold)."""
    try:
        return load(df, ext)
    except UserError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert any(re.search(reason, message) for reason in reasons), (message, reasons)
        return None


# ---------------------------------------------------------------- pairs


@st.composite
def pair_tables(draw) -> pd.DataFrame:
    """Distinct scored pairs, train and test rows (or no split column: a 90:10 holdout), identical texts on none,
    some or all rows, any scores including float32's extremes."""
    n_train, n_test = draw(st.integers(0, 40)), draw(st.integers(0, 110))
    n = n_train + n_test
    same = draw(st.sampled_from(["none", "some", "all"]))
    identical = (set(range(n)) if same == "all" else
                 draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n)) if same == "some" and n else set())
    text1 = [f"first text number {i}" for i in range(n)]
    df = pd.DataFrame({"text1": text1, "text2": [a if i in identical else f"second text {i}"
                                                 for i, a in enumerate(text1)],
                       "score": draw(st.lists(SCORES, min_size=n, max_size=n))})
    if draw(st.booleans()):
        df["split"] = ["train"] * n_train + ["test"] * n_test
    return df


def targets(df: pd.DataFrame) -> int | None:
    """How many target pairs the file's split gives (None: the split itself is refused)."""
    if "split" not in df:
        return math.ceil(HOLDOUT_FRACTION * len(df))
    n_test = int((df["split"] == "test").sum())
    n_train = len(df) - n_test
    if n_test:
        return n_test
    return math.ceil(HOLDOUT_FRACTION * n_train) if n_train >= MIN_ROWS else None


@PROPERTY
@given(df=pair_tables(), ext=st.sampled_from(EXTS))
def test_pair_files_that_cannot_mean_what_they_say_are_refused_or_warned_of(df, ext):
    scores = df["score"].to_numpy(dtype=np.float64)
    same = (df["text1"] == df["text2"]).to_numpy()
    n_target = targets(df)
    reasons = [r for r, holds in (
        ("beyond what float32 holds", (np.abs(scores) > F32_MAX).any()),
        ("no data rows|is empty|no rows", len(df) == 0),
        ("usable pairs are left after cleaning", len(df) < MIN_ROWS),
        ("leaves no pairs to evaluate on", n_target is None),
        (f"STS Spearman would be computed on {n_target} .* fewer than the {MIN_SCORED_PAIRS}",
         n_target is not None and n_target < MIN_SCORED_PAIRS),
        ("have two identical texts, whose cosine is 1 under any model", same.any()),
    ) if holds]
    corpus = refused_or_loaded(df, ext, reasons)
    if corpus is None:
        return
    assert isinstance(corpus, PairCorpus)
    # nothing that must be refused got through
    assert not (np.abs(scores) > F32_MAX).any() and len(corpus.test) == n_target >= MIN_SCORED_PAIRS
    assert np.mean([a == b for a, b in zip(corpus.test.text1, corpus.test.text2)]) < SAME_TEXT_REFUSED
    # no silent change: every pair kept with its texts and its exact score
    kept = [(a, b, s) for part in (corpus.train, corpus.test)
            for a, b, s in zip(part.text1, part.text2, part.scores.tolist())]
    assert sorted(kept) == sorted(zip(df["text1"], df["text2"], scores.tolist()))
    # and every such thing said
    warnings = corpus.report.warnings
    assert all(isinstance(w, str) and "\n" not in w for w in warnings)
    expected = []
    if n_target < FEW_SCORED_PAIRS:
        expected.append(f"STS Spearman is computed on only {n_target} {corpus.target_split} pairs, so its 95% "
                        "interval is wide")
    if same.any():
        n = int(same.sum())
        expected.append(f"{n:,} {'pair has' if n == 1 else 'pairs have'} two identical texts (cosine 1 under any "
                        "model).")
    merged = len(np.unique(scores)) - len(np.unique(scores.astype(np.float32)))
    if merged:
        expected.append(f"{merged:,} distinct scores in 'score' become equal at float32 precision")
    for start in expected:
        assert any(w.startswith(start) for w in warnings), (start, warnings)
    if n_target >= FEW_SCORED_PAIRS:
        assert not any("STS Spearman" in w for w in warnings), warnings


# ---------------------------------------------------------------- lists


@st.composite
def list_tables(draw) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Lists of 3 to 6 members, rows in any order: members all distinct, some lists repeating a member (or the
    anchor), or every text the same; maybe a split column. Returns the table and the lists it states."""
    n_lists = draw(st.integers(1, 25))
    mode = draw(st.sampled_from(["distinct", "some repeats", "all identical"]))
    with_split = draw(st.booleans())
    rows, lists = [], {}
    for i in range(n_lists):
        size = draw(st.integers(3, 6))
        members = ["the same text"] * size if mode == "all identical" else [f"list {i} member {m}" for m in range(size)]
        if mode == "some repeats" and draw(st.booleans()):
            a, b = draw(st.lists(st.integers(0, size - 1), min_size=2, max_size=2, unique=True))
            members[b] = members[a]
        split = draw(st.sampled_from(["train", "train", "test"]))
        lists[f"q{i}"] = members
        rows += [{"list_id": f"q{i}", "rank": r, "text": t, **({"split": split} if with_split else {})}
                 for r, t in enumerate(members, 1)]
    order = draw(st.permutations(range(len(rows))))
    return pd.DataFrame([rows[k] for k in order]), lists


@PROPERTY
@given(table=list_tables(), ext=st.sampled_from(EXTS))
def test_list_files_with_repeated_members_or_too_few_lists_are_refused_or_warned_of(table, ext):
    df, lists = table
    corpus = refused_or_loaded(df, ext, [f"holds {len(lists)} lists; provide at least {MIN_LISTS}"]
                               if len(lists) < MIN_LISTS else [])
    if corpus is None:
        return
    assert isinstance(corpus, ListCorpus)
    # no silent change: every list kept, its members in rank order, repeats included
    loaded = dict(zip(corpus.train.ids + corpus.test.ids, corpus.train.lists + corpus.test.lists))
    assert loaded == lists and len(corpus.test) >= 1
    repeats = sum(len(set(members)) < len(members) for members in lists.values())
    warnings = corpus.report.warnings
    assert all(isinstance(w, str) and "\n" not in w for w in warnings)
    said = [w for w in warnings if "the same text twice" in w]
    if repeats:
        assert said and said[0].startswith(f"{repeats:,} list{'s hold' if repeats > 1 else ' holds'} the same text "
                                           "twice"), warnings
    else:
        assert not said, warnings
