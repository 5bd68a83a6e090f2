"""Rows a corpus drops are counted in a warning, test rows without a score or label are named as the cause, and
an over-long text in a pair or list file is warned about as in a labelled one (issue 33)."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from core.data.corpus import build_corpus, detect_columns
from core.data.lists import build_lists, detect_list_columns
from core.data.pairs import build_pairs, detect_pair_columns
from core.errors import UserError


def _pairs(text: str):
    df = pd.read_csv(io.StringIO(text))
    return build_pairs(df, detect_pair_columns(df), name="p")


def _labelled(text: str):
    df = pd.read_csv(io.StringIO(text))
    return build_corpus(df, detect_columns(df), name="l")


def test_pairs_with_an_empty_score_are_counted():
    rows = "".join(f"first {i},second {i},{'' if i < 4 else i % 5}\n" for i in range(200))
    corpus = _pairs("text1,text2,score\n" + rows)
    assert corpus.report.missing_score_dropped == 4
    assert "4 of 200 rows dropped because their score in 'score' is empty." in corpus.report.warnings


def test_labelled_rows_with_an_empty_label_are_counted():
    rows = "".join(f"text number {i},{'' if i % 2 else 'ab'[i % 4 // 2]}\n" for i in range(829))
    corpus = _labelled("text,label\n" + rows)
    assert "414 of 829 rows dropped because their label in 'label' is empty." in corpus.report.warnings


@pytest.mark.parametrize("marker", ["nan", "NaN", "None", "NULL", "n/a", "#N/A", "-", " ? "])
def test_labels_that_mark_a_missing_value_are_dropped_and_named_not_made_a_class(marker):
    """The file reader keeps "nan" as text (a text can read "NA"); as a label it made a class of its own."""
    df = pd.DataFrame({"text": [f"text number {i}" for i in range(60)],
                       "label": [marker if i % 3 == 0 else "ab"[i % 2] for i in range(60)]})
    corpus = build_corpus(df, detect_columns(df), name="l")
    assert corpus.classes == ["a", "b"]
    assert f"20 of 60 rows dropped because their label in 'label' is empty or a missing-value marker " \
           f"({marker.strip()!r})." in corpus.report.warnings
    df["split"] = ["test" if i % 3 == 0 else "train" for i in range(60)]  # every test label a marker: refused
    with pytest.raises(UserError, match="The 20 rows that 'split' marks as test or validation all lack a label"):
        build_corpus(df, detect_columns(df), name="l")


def test_a_label_that_only_contains_a_marker_word_is_a_label():
    df = pd.DataFrame({"text": [f"text number {i}" for i in range(40)],
                       "label": ["none of these" if i % 2 else "nanny" for i in range(40)]})
    assert build_corpus(df, detect_columns(df), name="l").classes == ["nanny", "none of these"]


@pytest.mark.parametrize("kind", ["pairs", "labelled"])
def test_test_rows_that_all_lack_their_value_are_named_not_blamed_on_the_split(kind):
    if kind == "pairs":
        text = "text1,text2,score,split\n" + "".join(
            f"a {i},b {i},{'' if i >= 50 else i % 5},{'test' if i >= 50 else 'train'}\n" for i in range(60))
        build, what = _pairs, "score"
    else:
        text = "text,label,split\n" + "".join(
            f"text {i},{'' if i >= 50 else 'ab'[i % 2]},{'test' if i >= 50 else 'train'}\n" for i in range(60))
        build, what = _labelled, "label"
    with pytest.raises(UserError) as raised:
        build(text)
    message = str(raised.value)
    assert f"The 10 rows that 'split' marks as test or validation all lack a {what} in '{what}'" in message
    assert "\n" not in message


def test_long_texts_in_pair_and_list_files_are_warned_about():
    long = "word " * 10_000
    pairs = _pairs("text1,text2,score\n" + "".join(f"{long if i == 0 else f'a {i}'},b {i},{i % 5}\n"
                                                   for i in range(200)))
    assert any("1 texts are longer than 1,000 characters" in w for w in pairs.report.warnings)
    df = pd.DataFrame({"list_id": [i // 3 for i in range(90)], "rank": [i % 3 + 1 for i in range(90)],
                       "text": [long if i == 0 else f"member {i}" for i in range(90)]})
    lists = build_lists(df, detect_list_columns(df), name="l")
    assert any("1 texts are longer than 1,000 characters" in w for w in lists.report.warnings)


@pytest.mark.parametrize("content,named", [("text,label\n", "commas"), ("text;label\n", "semicolons")])
def test_a_tsv_file_holding_another_delimiter_names_the_delimiter(content, named, tmp_path, capsys):
    from core.cli import main

    path = tmp_path / "corpus.tsv"
    path.write_text(content + "".join(f"text {i}{content[4]}{'ab'[i % 2]}\n" for i in range(40)))
    assert main(["evaluate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"has no tabs and is separated by {named}" in err, err
    assert "name it .csv" in err


def test_a_tsv_file_with_one_column_holding_a_comma_in_its_name_is_still_one_column():
    from core.data.table import read_table

    df, _ = read_table("a,b\nx\ny\n".encode(), "one.tsv")
    assert list(df.columns) == ["a,b"]


def test_drop_leaked_that_leaves_too_few_test_pairs_says_so():
    rows = "".join(f"first {i},second {i},{i % 5},train\n" for i in range(40))
    rows += "".join(f"first {i},second {i},{i % 5},test\n" for i in range(4))  # leaked: also training pairs
    rows += "".join(f"other {i},pair {i},{i % 5},test\n" for i in range(8))
    df = pd.read_csv(io.StringIO("text1,text2,score,split\n" + rows))
    with pytest.raises(UserError) as raised:
        build_pairs(df, detect_pair_columns(df), name="p", drop_leaked=True)
    assert str(raised.value).startswith("Dropping the 4 test pairs that are also training pairs (drop_leaked) left "
                                        "8, fewer than the 10 STS Spearman needs")
    assert len(build_pairs(df, detect_pair_columns(df), name="p").test) == 12  # kept, they are enough


@pytest.mark.parametrize("change", [str.upper, lambda t: t.replace(" ", "  "), lambda t: f"  {t.title()} "])
def test_pairs_that_differ_only_in_what_the_model_ignores_are_refused_not_ranked(change, tiny_model):
    from core.evaluation.sts import sts_scored

    texts = [f"the {w} is good and the day is long number {i}" for i, w in enumerate(["word", "sound", "water"] * 20)]
    df = pd.DataFrame({"text1": texts, "text2": [change(t) for t in texts], "score": [i % 5 for i in range(60)],
                       "split": ["train"] * 40 + ["test"] * 20})
    pairs = build_pairs(df, detect_pair_columns(df), name="p")
    with pytest.raises(UserError, match="reads the two texts of every test pair as the same tokens"):
        sts_scored(tiny_model, pairs)


def test_pairs_that_differ_only_in_case_spacing_or_accents_are_counted_beside_identical_ones():
    """8 of 12 test pairs that an uncased model reads as one text were counted as 2, the byte-identical ones only."""
    variants = [str.upper, lambda t: t.replace(" ", "\t"), lambda t: t.replace("e", "é"), lambda t: t]
    rows = [f"first text {i},second text {i},{i % 5},train" for i in range(40)]
    rows += [f"pair text {i},{variants[i % 4](f'pair text {i}') if i < 8 else f'other {i}'},{i % 5},test"
             for i in range(12)]
    corpus = _pairs("text1,text2,score,split\n" + "\n".join(rows) + "\n")
    assert "2 pairs have two identical texts (cosine 1 under any model)." in corpus.report.warnings
    assert ("6 more pairs differ only in case, spacing or accents (cosine 1 under an uncased model, whatever the gold "
            "score).") in corpus.report.warnings
