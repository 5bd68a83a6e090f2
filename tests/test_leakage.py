"""Train/test leakage (issue 7): test texts that are also training texts (exact, after the cleaning the duplicate count
uses) are counted with examples in the validation report, and can be dropped from the test split only: on a small
table, on TREC, from the CLI (--drop-leaked) and from the Corpus page's checkbox. Pair and list corpora:
tests/test_leakage_kinds.py."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from core.cli import main
from core.data.corpus import Columns, build_corpus, detect_columns, load_corpus
from core.data.table import LEAK_EXAMPLES
from core.errors import UserError
from tests.conftest import no_errors, paste_table, shared_data

SPLIT = Columns("text", "label", "split")


def table(leaked: int = 3, padded: bool = False) -> pd.DataFrame:
    """20 training and 6 test rows over two classes; the first `leaked` test texts repeat training texts (with spaces
    around them when `padded`), one of them under the other label."""
    train = [(f"train text {i} about {'ab'[i % 2]}", "ab"[i % 2], "train") for i in range(20)]
    test = [(f"test text {i} about {'ab'[i % 2]}", "ab"[i % 2], "test") for i in range(6)]
    for i in range(leaked):
        text = train[i][0]
        test[i] = (f"  {text} " if padded else text, "ab"[(i + (i == 0)) % 2], "test")
    return pd.DataFrame(train + test, columns=["text", "label", "split"])


def test_report_counts_test_texts_that_are_training_texts_with_examples():
    corpus = build_corpus(table(3), SPLIT, "t")
    report = corpus.report
    assert (report.leaked, report.leaked_dropped) == (3, 0)
    assert report.leaked_examples == [f"train text {i} about {'ab'[i % 2]}" for i in range(3)]
    assert len(corpus.test_texts) == 6 and corpus.leakage() == "3 test texts are also training texts"
    assert corpus.summary()["leaked"] == 3 and corpus.summary()["leaked_dropped"] == 0
    json.dumps(report.as_dict())


def test_leakage_ignores_case_and_spacing_as_an_uncased_model_does():
    """Issue 33: a test text that is a training text upper-cased was not a leak, yet an uncased model reads both as
    one text (kNN 0.86 with such leaks, 0.64 without)."""
    assert build_corpus(table(2, padded=True), SPLIT, "t").report.leaked == 2  # spaces around a text are trimmed
    cased = table(0)
    cased.loc[20, "text"] = cased.loc[0, "text"].upper()
    cased.loc[21, "text"] = "  ".join(cased.loc[1, "text"].split(" "))
    assert build_corpus(cased, SPLIT, "t").report.leaked == 2
    other = table(0)
    other.loc[20, "text"] = other.loc[0, "text"] + " too"  # another text: not a leak
    assert build_corpus(other, SPLIT, "t").report.leaked == 0


def test_examples_are_capped_and_one_leak_reads_in_the_singular():
    many = table(0)
    many.loc[20:25, "text"] = many.loc[0:5, "text"].to_numpy()
    report = build_corpus(many, SPLIT, "t").report
    assert report.leaked == 6 and len(report.leaked_examples) == LEAK_EXAMPLES
    assert build_corpus(table(1), SPLIT, "t").leakage() == "1 test text is also a training text"


def test_drop_removes_them_from_the_test_split_only_and_changes_the_fingerprint():
    kept, dropped = build_corpus(table(3), SPLIT, "t"), build_corpus(table(3), SPLIT, "t", drop_leaked=True)
    assert (dropped.report.leaked, dropped.report.leaked_dropped) == (3, 3)
    assert dropped.train_texts == kept.train_texts and list(dropped.train_labels) == list(kept.train_labels)
    assert dropped.test_texts == kept.test_texts[3:]
    assert not set(dropped.test_texts) & set(dropped.train_texts)
    assert dropped.fingerprint != kept.fingerprint
    assert dropped.summary()["leaked_dropped"] == 3 and dropped.summary()["rows_test"] == 3
    assert (kept.report.rows_kept, dropped.report.rows_kept) == (26, 23)
    assert sum(dropped.report.class_counts.values()) == 23


def test_drop_on_a_corpus_without_leaks_changes_nothing():
    kept, dropped = build_corpus(table(0), SPLIT, "t"), build_corpus(table(0), SPLIT, "t", drop_leaked=True)
    assert (dropped.report.leaked, dropped.report.leaked_dropped) == (0, 0)
    assert dropped.test_texts == kept.test_texts and dropped.fingerprint == kept.fingerprint


def test_holdout_split_counts_copies_on_both_sides_and_keeps_the_split_of_other_rows():
    df = table(0).drop(columns="split")
    df = pd.concat([df, df.iloc[:10]], ignore_index=True)  # ten texts twice: a copy may be held out, its twin not
    kept = build_corpus(df, detect_columns(df), "t")
    dropped = build_corpus(df, detect_columns(df), "t", drop_leaked=True)
    leaked = [t for t in kept.test_texts if t in set(kept.train_texts)]
    assert kept.target_split == "holdout" and kept.report.leaked == len(leaked) > 0
    assert dropped.train_texts == kept.train_texts
    assert dropped.test_texts == [t for t in kept.test_texts if t not in leaked]


def test_dropping_every_test_text_is_one_clear_error():
    df = table(0)
    df.loc[20:25, "text"] = df.loc[0:5, "text"].to_numpy()
    with pytest.raises(UserError, match="^Every one of the 6 test texts is also a training text") as caught:
        build_corpus(df, SPLIT, "t", drop_leaked=True)
    assert "\n" not in str(caught.value)


def test_trec_has_eleven_test_questions_that_are_training_questions():
    """Ten exact repeats, and one in other case or spacing."""
    path = shared_data("trec.csv")
    kept, dropped = load_corpus(path), load_corpus(path, drop_leaked=True)
    assert kept.report.leaked == 11 and "What is leukemia ?" in kept.report.leaked_examples
    assert (len(kept.test_texts), len(dropped.test_texts)) == (500, 489)
    assert dropped.train_texts == kept.train_texts and dropped.fingerprint != kept.fingerprint


# ---------------------------------------------------------------- CLI: --drop-leaked


@pytest.fixture
def leaky_csv(tmp_path):
    path = tmp_path / "leaky.csv"
    table(3).to_csv(path, index=False)
    return path


def test_cli_warns_about_leaks_and_drops_them_with_the_flag(leaky_csv, tiny_model_dir, capsys):
    assert main(["evaluate", str(leaky_csv), "--model", str(tiny_model_dir), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_queries"] == 6
    assert "warning: 3 test texts are also training texts (e.g. 'train text 0 about a'" in out.err
    assert "--drop-leaked drops them" in out.err

    assert main(["evaluate", str(leaky_csv), "--model", str(tiny_model_dir), "--json", "--drop-leaked"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_queries"] == 3
    assert "dropped from the test split (--drop-leaked)" in out.err


def test_cli_flag_on_a_corpus_without_leaks_runs_and_says_nothing_about_them(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "clean.csv"
    table(0).to_csv(path, index=False)
    assert main(["layers", str(path), "--model", str(tiny_model_dir), "--json", "--drop-leaked", "--drop-leaked"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["layers"] and "training texts" not in out.err


def test_cli_flag_hostile_cases_exit_2_with_one_line(tmp_path, leaky_csv, capsys):
    """(Pair and list corpora take the flag too: tests/test_leakage_kinds.py.)"""
    all_leaked = tmp_path / "all.csv"
    df = table(0)
    df.loc[20:25, "text"] = df.loc[0:5, "text"].to_numpy()
    df.to_csv(all_leaked, index=False)
    assert main(["evaluate", str(all_leaked), "--drop-leaked"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Every one of the 6 test texts") and err.count("\n") == 1

    with pytest.raises(SystemExit) as exited:  # a store_true flag takes no value: argparse's usage error, exit 2
        main(["evaluate", str(leaky_csv), "--drop-leaked=yes"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit):  # only the commands that read the corpus in-process have it
        main(["runs", "--drop-leaked"])


# ---------------------------------------------------------------- Corpus page: the checkbox


def leaky_paste() -> str:
    return table(3).to_csv(index=False)


def test_corpus_page_shows_the_leaks_and_its_checkbox_drops_them_from_the_test_split(app):
    at = paste_table(app, leaky_paste())
    no_errors(at)
    leak = next(w.value for w in at.warning if "training texts" in w.value)
    assert leak.startswith("**3 test texts are also training texts**, so a model can score them by memory")
    assert "`train text 0 about a`" in leak
    before = at.session_state["corpus"]
    assert len(before.test_texts) == 6

    at.checkbox(key="drop_leaked").check().run()
    no_errors(at)
    after = at.session_state["corpus"]
    assert len(after.test_texts) == 3 and after.train_texts == before.train_texts
    assert after.fingerprint != before.fingerprint
    assert any("; dropped from the test split" in w.value for w in at.warning)
    assert at.checkbox(key="drop_leaked").value is True
    assert any("20 train and 3 test texts" in c.value for c in at.caption)

    at.checkbox(key="drop_leaked").uncheck().run()
    no_errors(at)
    assert at.session_state["corpus"].fingerprint == before.fingerprint


def test_corpus_page_shows_no_leak_box_for_a_clean_corpus(app):
    at = paste_table(app, table(0).to_csv(index=False))
    no_errors(at)
    assert not [w for w in at.warning if "training texts" in w.value]
    assert "drop_leaked" not in [c.key for c in at.checkbox]


def test_a_run_records_the_choice_and_its_worker_reads_the_corpus_the_page_showed(leaky_csv):
    """drop_leaked is a run setting: saved in the config (reproducible), and load_any (the worker's and the
    export's reader) drops the same rows (of pair and list corpora too: tests/test_leakage_kinds.py)."""
    from core.data.kinds import load_any
    from core.training.config import TrainConfig

    cfg = TrainConfig.from_dict({"corpus": str(leaky_csv), "model": "m", "drop_leaked": True})
    assert cfg.to_dict()["drop_leaked"] is True
    assert TrainConfig.from_dict({"corpus": str(leaky_csv), "model": "m"}).drop_leaked is False
    kept = load_any(leaky_csv, drop_leaked=True)
    assert kept.report.leaked_dropped == 3 and len(kept.test_texts) == len(load_any(leaky_csv).test_texts) - 3
    with pytest.raises(UserError):
        TrainConfig.from_dict({"corpus": str(leaky_csv), "model": "m", "drop_leaked": "maybe"})
