"""Issue 33, as properties: a test item that repeats a training item in other case, spacing, accents or width is a
leak, as an exact repeat is, in labelled, pair and list files alike (an uncased model reads "GOOD FILM", "good  film"
and "gööd film" as one text); and a pair file whose every test pair differs only in case, spacing or accents is
refused by STS, not ranked."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.data.corpus import build_corpus, detect_columns
from core.data.lists import build_lists, detect_list_columns
from core.data.pairs import build_pairs, detect_pair_columns
from core.data.table import leak_text
from core.errors import UserError

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])
WORDS = ["good", "film", "market", "fell", "rain", "today", "the", "a", "very", "slow"]
SAME_TO_THE_MODEL = [str.upper, str.title, str.swapcase, lambda t: t.replace(" ", "  "), lambda t: f" {t}\t",
                     lambda t: t.replace(" ", "\u00a0"),
                     lambda t: t.replace("e", "é").replace("o", "ö")]  # accents (every text has an "e")
# Full-width letters are the same text after NFKC, which leakage applies; an uncased BERT tokenizer does not.
VARIANTS = st.sampled_from([*SAME_TO_THE_MODEL,
                            lambda t: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t)])


def _text(i: int) -> str:
    return f"{WORDS[i % 10]} {WORDS[(i // 10) % 10]} number {i}"


@PROPERTY
@given(variant=VARIANTS, leaked=st.sets(st.integers(0, 39), min_size=1, max_size=10))
def test_labelled_test_texts_in_other_case_or_spacing_are_leaks(variant, leaked):
    train = [_text(i) for i in range(40)]
    test = [variant(train[i]) if i in leaked else f"fresh text {i}" for i in range(12)]
    df = pd.DataFrame({"text": train + test, "label": [i % 2 for i in range(52)],
                       "split": ["train"] * 40 + ["test"] * 12})
    expected = sum(1 for i in range(12) if i in leaked)
    corpus = build_corpus(df, detect_columns(df), name="l")
    assert corpus.report.leaked == expected
    if expected < 12:
        dropped = build_corpus(df, detect_columns(df), name="l", drop_leaked=True)
        assert len(dropped.test_texts) == 12 - expected
        assert all(leak_text(t) not in {leak_text(x) for x in train} for t in dropped.test_texts)


@PROPERTY
@given(variant=VARIANTS, leaked=st.sets(st.integers(0, 29), min_size=1, max_size=8), swap=st.booleans())
def test_pairs_in_other_case_or_spacing_are_leaks(variant, leaked, swap):
    train = [(_text(i), _text(i + 100)) for i in range(80)]
    test = [((variant(train[i][1]), variant(train[i][0])) if swap else (variant(train[i][0]), train[i][1]))
            if i in leaked else (f"fresh one {i}", f"fresh two {i}") for i in range(30)]
    rows = train + test
    df = pd.DataFrame({"text1": [a for a, _ in rows], "text2": [b for _, b in rows],
                       "score": [i % 5 for i in range(len(rows))], "split": ["train"] * 80 + ["test"] * 30})
    corpus = build_pairs(df, detect_pair_columns(df), name="p")
    assert corpus.report.leaked == len(leaked)


@PROPERTY
@given(variant=VARIANTS, leaked=st.sets(st.integers(0, 14), min_size=1, max_size=5))
def test_lists_in_other_case_or_spacing_are_leaks(variant, leaked):
    members = [[_text(3 * i + j) for j in range(3)] for i in range(45)]
    test = [[variant(t) for t in members[i]] if i in leaked else [f"new {i} {j}" for j in range(3)]
            for i in range(15)]
    lists = members + test
    df = pd.DataFrame({"list_id": [i for i, lst in enumerate(lists) for _ in lst],
                       "rank": [r + 1 for lst in lists for r in range(len(lst))],
                       "text": [t for lst in lists for t in lst],
                       "split": [("train" if i < 45 else "test") for i, lst in enumerate(lists) for _ in lst]})
    corpus = build_lists(df, detect_list_columns(df), name="l")
    assert corpus.report.leaked == len(leaked)


@PROPERTY
@given(variant=st.sampled_from(SAME_TO_THE_MODEL))
def test_test_pairs_that_differ_only_in_case_or_spacing_are_refused_by_sts(variant, tiny_model):
    from core.evaluation.sts import sts_scored

    texts = [_text(i) for i in range(60)]
    df = pd.DataFrame({"text1": texts, "text2": [variant(t) for t in texts], "score": [i % 5 for i in range(60)],
                       "split": ["train"] * 40 + ["test"] * 20})
    try:
        pairs = build_pairs(df, detect_pair_columns(df), name="p")
    except UserError as exc:  # the loader's own check: texts equal after its cleaning
        assert "identical texts" in str(exc)
        return
    with pytest.raises(UserError, match="as the same tokens"):
        sts_scored(tiny_model, pairs)
