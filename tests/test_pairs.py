"""Pair corpora: scores and / or NLI labels, the label direction, every bad input as a one-line UserError,
deterministic splits, odd encodings and file formats, the cheap kind check, and the real STS-B / SNLI files."""

import json

import numpy as np
import pandas as pd
import pytest

from core.data.kinds import corpus_kind
from core.data.pairs import (
    NLI_LABELS,
    PairColumns,
    build_pairs,
    detect_pair_columns,
    is_pair_table,
    load_pairs,
)
from core.errors import UserError
from tests.conftest import shared_data


def table(n: int = 20, score: bool = True, label: str | None = None, split: list[str] | None = None) -> pd.DataFrame:
    """n distinct pairs; scores 0..n-1; labels cycle through the NLI words (or their codes with label='int')."""
    data = {"text1": [f"first text number {i}" for i in range(n)], "text2": [f"second text {i}" for i in range(n)]}
    if score:
        data["score"] = [float(i) for i in range(n)]
    if label == "words":
        data["label"] = [NLI_LABELS[i % 3].upper() if i % 2 else NLI_LABELS[i % 3] for i in range(n)]
    elif label == "int":
        data["label"] = [i % 3 for i in range(n)]
    if split is not None:
        data["split"] = split
    return pd.DataFrame(data)


def write(tmp_path, df: pd.DataFrame, name: str = "pairs.csv", encoding: str = "utf-8") -> str:
    path = tmp_path / name
    path.write_bytes(df.to_csv(index=False).encode(encoding))
    return str(path)


def pairs_of(df: pd.DataFrame, **overrides):
    return build_pairs(df, detect_pair_columns(df, **overrides), "t")


def one_line_error(df: pd.DataFrame, match: str, **overrides) -> str:
    with pytest.raises(UserError, match=match) as err:
        pairs_of(df, **overrides)
    assert "\n" not in str(err.value)
    return str(err.value)


# ---------------------------------------------------------------- happy paths


def test_scores_only_without_split_holds_out_10_percent_deterministically():
    corpus = pairs_of(table(100))
    assert corpus.columns == PairColumns("text1", "text2", "score", None, None)
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (90, 10, "holdout")
    assert corpus.test.scores.dtype == np.float64 and (corpus.test.labels == -1).all()
    assert sorted(corpus.train.scores.tolist() + corpus.test.scores.tolist()) == [float(i) for i in range(100)]
    again = pairs_of(table(100))
    assert again.test.text1 == corpus.test.text1 and again.fingerprint == corpus.fingerprint
    assert "seed 0" in corpus.report.split_source


def test_label_words_any_case_keep_the_direction_zero_most_related():
    corpus = pairs_of(table(30, score=False, label="words"))
    codes = np.concatenate([corpus.train.labels, corpus.test.labels])
    assert corpus.columns.score is None and np.isnan(corpus.test.scores).all()
    assert corpus.report.label_counts == {"entailment": 10, "neutral": 10, "contradiction": 10}
    assert NLI_LABELS.index("entailment") == 0 and NLI_LABELS.index("contradiction") == 2
    first = corpus.train.text1.index("first text number 0")  # row 0 is entailment
    assert corpus.train.labels[first] == 0 and codes.dtype == np.int64


def test_integer_labels_and_scores_together_with_a_split_column():
    split = ["train"] * 14 + ["validation"] * 3 + ["test"] * 10
    corpus = pairs_of(table(27, label="int", split=split))
    assert corpus.target_split == "test" and len(corpus.train) == 14 and len(corpus.test) == 10
    assert corpus.test.scores.tolist() == [float(i) for i in range(17, 27)]
    assert corpus.test.labels.tolist() == [i % 3 for i in range(17, 27)]
    assert any("3 'validation'" in w for w in corpus.report.warnings)
    summary = corpus.summary()
    assert summary["kind"] == "pairs" and summary["score_range"] == [0.0, 26.0]
    assert summary["rows_train"] == 14 and summary["rows_test"] == 10
    json.dumps(summary), json.dumps(corpus.report.as_dict())


def test_validation_is_the_target_without_test_rows():
    corpus = pairs_of(table(25, split=["train"] * 15 + ["dev"] * 10))
    assert corpus.target_split == "validation" and len(corpus.test) == 10


def test_split_column_without_targets_holds_out_train_rows_with_a_warning():
    corpus = pairs_of(table(100, split=["train"] * 100))
    assert corpus.target_split == "holdout" and len(corpus.test) == 10 and corpus.report.warnings


def test_sentence1_sentence2_names_and_overrides():
    df = table(100).rename(columns={"text1": "Sentence1", "text2": "SENTENCE2", "score": "relatedness"})
    assert is_pair_table(df) and not is_pair_table(pd.DataFrame(columns=["text", "label"]))
    corpus = pairs_of(df, score_col="relatedness")
    assert corpus.columns == PairColumns("Sentence1", "SENTENCE2", "relatedness", None, None)


def test_missing_cells_and_empty_texts_are_dropped_and_counted():
    df = table(100, label="words").astype(object)
    df.loc[0, "text1"] = "   "
    df.loc[1, "score"] = None
    df.loc[2, "label"] = ""
    df.loc[3, "score"], df.loc[3, "label"] = None, None
    corpus = pairs_of(df)
    r = corpus.report
    assert (r.rows_read, r.rows_kept, r.empty_dropped) == (100, 96, 1)
    assert (r.missing_score_dropped, r.missing_label_dropped) == (2, 2)


def test_duplicate_pairs_are_counted_and_kept():
    df = pd.concat([table(100), table(100).iloc[:2]], ignore_index=True)
    corpus = pairs_of(df)
    assert corpus.report.duplicates == 2 and corpus.report.rows_kept == 102


def test_fingerprint_changes_with_a_score():
    df = table(100)
    changed = df.copy()
    changed.loc[5, "score"] = 99.0
    assert pairs_of(df).fingerprint != pairs_of(changed).fingerprint


# ---------------------------------------------------------------- errors


def test_no_text_columns():
    one_line_error(pd.DataFrame({"text": ["a"] * 12, "score": [1.0] * 12}), "text1 and a text2")


def test_neither_score_nor_label():
    one_line_error(table(12, score=False), "score column .* or an NLI label column")


@pytest.mark.parametrize("bad, shown", [("high", "'high'"), ("NaN", "'NaN'"), ("inf", "inf"), ("-Infinity", "-inf")])
def test_score_that_is_not_a_finite_number_is_named(tmp_path, bad, shown):
    df = table(12).astype({"score": object})
    df.loc[4, "score"] = bad
    with pytest.raises(UserError, match="finite numbers") as err:
        load_pairs(write(tmp_path, df))
    assert f"found {shown}." in str(err.value) and "\n" not in str(err.value)


def test_inf_in_a_numeric_score_column():
    df = table(12)
    df.loc[0, "score"] = np.inf
    one_line_error(df, "finite numbers; found inf")


def test_unknown_labels_are_named():
    df = table(12, score=False, label="words").astype(object)
    df.loc[0, "label"], df.loc[1, "label"], df.loc[2, "label"] = "maybe", 3, "1.5"
    message = one_line_error(df, "entailment, neutral, contradiction or 0, 1, 2")
    assert "'maybe'" in message and "3" in message and "'1.5'" in message


def test_too_few_rows_and_empty_target_split():
    one_line_error(table(9), "Only 9 usable pairs")
    one_line_error(table(12, split=["train"] * 6 + ["other"] * 6), "no pairs to evaluate on")


def test_duplicate_column_names():
    df = table(12)
    df.columns = ["text1", "text2", "text1"]
    one_line_error(df, "duplicate column names")
    with pytest.raises(UserError, match="duplicate column names"):
        build_pairs(df, PairColumns("text1", "text2", "text1", None, None), "t")


def test_missing_override_lists_the_columns():
    one_line_error(table(12), "no score column named 'sim'.*text1, text2, score", score_col="sim")


# ---------------------------------------------------------------- files and encodings


def test_utf8_bom_and_latin1(tmp_path):
    df = table(100)
    df.loc[0, "text1"] = "café crème"
    bom = load_pairs(write(tmp_path, df, "bom.csv", "utf-8-sig"))
    assert bom.columns.text1 == "text1" and "café crème" in bom.train.text1 + bom.test.text1
    latin = load_pairs(write(tmp_path, df, "latin.csv", "latin-1"))
    assert "café crème" in latin.train.text1 + latin.test.text1
    assert any("Latin-1" in w for w in latin.report.warnings)


def test_tsv_jsonl_and_parquet(tmp_path):
    df = table(99, label="int")
    (tmp_path / "p.tsv").write_text(df.to_csv(index=False, sep="\t"), encoding="utf-8")
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in df.to_dict("records")), encoding="utf-8")
    df.to_parquet(tmp_path / "p.parquet")
    for name in ("p.tsv", "p.jsonl", "p.parquet"):
        corpus = load_pairs(tmp_path / name)
        assert corpus.report.rows_kept == 99 and corpus.report.label_counts == {
            "entailment": 33, "neutral": 33, "contradiction": 33}, name
        assert corpus_kind(tmp_path / name) == "pairs"


def test_corpus_kind_reads_only_the_head_of_a_large_file(tmp_path):
    path = tmp_path / "big.csv"
    head = table(12).to_csv(index=False).encode()
    path.write_bytes(head + b'"unclosed quote' + b"x" * 200_000 + b"\n")  # a tail that a full read rejects
    assert corpus_kind(path) == "pairs"
    with pytest.raises(UserError, match="Could not parse"):
        load_pairs(path)
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text,label\nhello,a\nbye,b\n", encoding="utf-8")
    assert corpus_kind(labelled) == "labelled"
    with pytest.raises(UserError, match="does not exist"):
        corpus_kind(tmp_path / "missing.csv")


# ---------------------------------------------------------------- real data


def test_real_stsb_counts_per_split():
    corpus = load_pairs(shared_data("stsb.csv"))
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (5749, 1379, "test")
    assert corpus.summary()["score_range"] == [0.0, 5.0] and corpus.columns.label is None


def test_real_snli_counts_per_split():
    corpus = load_pairs(shared_data("snli.csv"))
    # no 'train' rows: the validation pairs train, the test pairs are the targets, and the report says so
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (9842, 9824, "test")
    assert any("validation rows train" in w for w in corpus.report.warnings)
    assert corpus.report.label_counts == {"entailment": 6697, "neutral": 6454, "contradiction": 6515}


# ---------------------------------------------------------------- pairs that cannot mean what they say (issue 26)


def test_an_empty_second_text_column_is_called_empty_not_numbers(tmp_path):
    df = table(40)
    df["text2"] = None
    one_line_error(df, "Column 'text2' is empty: no row has a text in it.")
    path = write(tmp_path, df)  # read back from a file, where pandas makes the empty column float NaN
    with pytest.raises(UserError, match="Column 'text2' is empty"):
        load_pairs(path)


def test_rows_dropped_for_an_empty_text_are_said_with_their_counts():
    df = table(200)
    df.loc[df.index % 2 == 0, "text2"] = ""
    corpus = pairs_of(df)
    assert corpus.report.rows_kept == 100
    assert "100 of 200 rows dropped because a text is empty (0 in 'text1', 100 in 'text2')." in corpus.report.warnings


def test_a_target_split_of_identical_texts_is_refused_and_some_are_counted():
    df = table(100)
    df["text2"] = df["text1"]
    one_line_error(df, "have two identical texts, whose cosine is 1 under any model")
    few = table(100)
    few.loc[:2, "text2"] = few.loc[:2, "text1"]
    assert "3 pairs have two identical texts (cosine 1 under any model)." in pairs_of(few).report.warnings
    one = table(100)
    one.loc[0, "text2"] = one.loc[0, "text1"]
    assert "1 pair has two identical texts (cosine 1 under any model)." in pairs_of(one).report.warnings


@pytest.mark.parametrize("value", [1e39, -1e300])
def test_scores_beyond_float32_are_refused(value):
    df = table(40)
    df.loc[5, "score"] = value
    one_line_error(df, "1 score in 'score' is beyond what float32 holds")


def test_scores_that_float32_merges_are_counted():
    df = table(100)
    df["score"] = [1.0 + i * 1e-10 for i in range(100)]  # distinct in float64, one value in float32
    assert any(w.startswith("99 distinct scores in 'score' become equal at float32 precision")
               for w in pairs_of(df).report.warnings)


def test_quick_on_a_pair_corpus_says_the_margin_slider_needs_labels(tmp_path, capsys):
    from core.cli import main

    code = main(["quick", write(tmp_path, table(40)), "--margin", "0.1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "trains on a labelled corpus (text, label)" in err
    assert "triplet" not in err  # a recipe the user never chose


# ---------------------------------------------------------------- too few scored pairs (issue 26)


def test_fewer_than_ten_scored_target_pairs_are_refused_naming_the_count_and_the_minimum():
    message = one_line_error(table(90), "STS Spearman would be computed on 9 holdout pairs, fewer than the 10 it "
                                        "needs to mean anything")
    assert "provide at least 91 scored pairs to hold out 90:10" in message
    message = one_line_error(table(59, split=["train"] * 50 + ["test"] * 9), "computed on 9 test pairs, fewer than "
                                                                             "the 10")
    assert "give at least 10 scored pairs the split 'test' in column 'split'" in message
    assert len(pairs_of(table(91)).test) == 10  # the fewest pairs whose 10% holdout is 10
    assert len(pairs_of(table(40, score=False, label="words")).test) == 4  # no score, no STS Spearman: no minimum


def test_fewer_than_a_hundred_scored_target_pairs_are_warned_with_the_width_of_the_interval():
    assert ("STS Spearman is computed on only 10 holdout pairs, so its 95% interval is wide: about ±63 points around "
            "a Spearman of 0 (each evaluation states its own interval); 100 or more pairs narrow it."
            in pairs_of(table(91)).report.warnings)
    enough = pairs_of(table(200, split=["train"] * 100 + ["test"] * 100))
    assert len(enough.test) == 100 and not any("STS Spearman" in w for w in enough.report.warnings)


def test_evaluate_refuses_a_handful_of_pairs_and_names_the_interval_of_a_few(tmp_path, tiny_model_dir, capsys):
    from core.cli import main

    few = write(tmp_path, table(40, split=["train"] * 31 + ["test"] * 9), "few.csv")
    assert main(["evaluate", few, "--model", str(tiny_model_dir)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: STS Spearman would be computed on 9 test pairs, fewer than the 10 it needs to mean anything; give at "
        "least 10 scored pairs the split 'test' in column 'split'.")
    some = write(tmp_path, table(60, split=["train"] * 30 + ["test"] * 30), "some.csv")
    assert main(["evaluate", some, "--model", str(tiny_model_dir), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    low, high = out["sts_spearman_ci"]
    assert out["n_pairs"] == 30 and low < out["sts_spearman"] < high
    warned = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert warned == [
        "warning: STS Spearman is computed on only 30 test pairs, so its 95% interval is wide: about ±36 points around "
        "a Spearman of 0 (each evaluation states its own interval); 100 or more pairs narrow it.",
        f"warning: STS Spearman {out['sts_spearman']:.2f} is computed on only 30 test pairs: its 95% interval, "
        f"{low:.1f} to {high:.1f}, is wide; 100 or more pairs narrow it."]


def test_a_run_refuses_an_sts_corpus_of_a_handful_of_pairs_before_it_starts(tmp_path, capsys):
    from core.cli import main
    from core.data.corpus import demo_corpus_path
    from core.runs.store import RunStore

    few = write(tmp_path, table(40, split=["train"] * 35 + ["test"] * 5), "few.csv")
    assert main(["train", str(demo_corpus_path()), "--sts-corpus", few]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: STS Spearman would be computed on 5 test pairs") and "\n" not in err
    assert RunStore().list() == []
