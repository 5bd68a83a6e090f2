"""Corpus layer: every input format, every bad input as a UserError, deterministic splits, the demo files."""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.data import demo
from core.data.corpus import (
    Columns,
    build_corpus,
    demo_corpus_path,
    demo_documents_path,
    detect_columns,
    load_corpus,
)
from core.data.crops import load_documents
from core.data.table import read_pasted, read_table
from core.errors import UserError

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


def rows(n_per_class: int = 10, classes=("pos", "neg")) -> pd.DataFrame:
    """A small valid table: distinct texts, balanced labels."""
    data = [(f"text number {i} about {c}", c) for c in classes for i in range(n_per_class)]
    return pd.DataFrame(data, columns=["text", "label"])


def csv_bytes(df: pd.DataFrame, sep: str = ",", encoding: str = "utf-8") -> bytes:
    return df.to_csv(index=False, sep=sep).encode(encoding)


def corpus_of(df: pd.DataFrame, **kw):
    return build_corpus(df, detect_columns(df), "t", **kw)


# ---------------------------------------------------------------- formats


@pytest.mark.parametrize("sep, filename", [(",", "a.csv"), ("\t", "a.tsv"), (";", "a.csv"), ("\t", "a.txt")])
def test_delimited_formats(sep, filename):
    df, warnings = read_table(csv_bytes(rows(), sep), filename)
    assert list(df.columns) == ["text", "label"] and len(df) == 20 and warnings == []


def test_quoted_commas_and_semicolons_in_text():
    data = b'text,label\n"one, two; three",a\n"say ""hi""",b\n'
    df, _ = read_table(data, "q.csv")
    assert df["text"].tolist() == ["one, two; three", 'say "hi"']


def test_jsonl_and_json_array():
    records = rows().to_dict("records")
    jsonl = "\n".join(json.dumps(r) for r in records).encode()
    assert len(read_table(jsonl, "a.jsonl")[0]) == 20
    assert len(read_table(json.dumps(records).encode(), "a.json")[0]) == 20


def test_parquet(tmp_path):
    buf = io.BytesIO()
    rows().to_parquet(buf)
    df, warnings = read_table(buf.getvalue(), "a.parquet")
    assert df["label"].tolist()[:1] == ["pos"] and warnings == []


def test_pasted_tsv_and_csv():
    assert read_pasted("text\tlabel\nhello world\ta\nbye\tb\n")[0]["label"].tolist() == ["a", "b"]
    assert read_pasted("text,label\nhello,1\nbye,0")[0]["text"].tolist() == ["hello", "bye"]


def test_texts_reading_na_are_kept():
    df, _ = read_table(b"text,label\nNA,a\nnull,b\n", "a.csv")
    assert df["text"].tolist() == ["NA", "null"]


# ---------------------------------------------------------------- encodings and bad files


def test_utf8_bom():
    df, warnings = read_table(b"\xef\xbb\xbf" + csv_bytes(rows()), "a.csv")
    assert df.columns[0] == "text" and warnings == []


def test_latin1_read_with_warning():
    data = "text,label\ncafé crème,a\nnaïve,b\n".encode("latin-1")
    df, warnings = read_table(data, "a.csv")
    assert df["text"].tolist() == ["café crème", "naïve"]
    assert len(warnings) == 1 and "UTF-8" in warnings[0]


def test_utf16_with_bom():
    df, _ = read_table("text\tlabel\nhé\ta\n".encode("utf-16"), "a.tsv")
    assert df["text"].tolist() == ["hé"]


@pytest.mark.parametrize("data, filename", [
    (bytes(range(256)) * 20, "junk.csv"),
    (bytes(range(1, 32)) * 100, "junk.csv"),
    (bytes(range(1, 32)) * 100 + b"\x81\x8d" * 50, "junk.csv"),
    (b"PK\x03\x04" + b"\x00" * 50, "sheet.csv"),
    (b"\x00\x01junk", "a.jsonl"),
    (b"not parquet at all", "a.parquet"),
    (b"PAR1 but truncated PAR1", "a.parquet"),
    (b"", "a.csv"),
    (b"text,label\n", "a.csv"),
    (b'text,label\n"unclosed,a\nb,c,d,e\n', "a.csv"),
    (b'{"text": "a", "label": 1}\n{broken\n', "a.jsonl"),
    (b'[1, 2, 3]', "a.json"),
    (b"text,label\na,b\n", "a.xlsx"),
])
def test_bad_files_raise_user_error(data, filename):
    with pytest.raises(UserError):
        read_table(data, filename)


def test_size_limit_names_the_limit():
    with pytest.raises(UserError, match="1 MB upload limit"):
        read_table(b"x" * (2 * 2**20), "big.csv", max_bytes=2**20)


def test_load_corpus_missing_file_and_size(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_corpus(tmp_path / "nope.csv")
    path = tmp_path / "c.csv"
    path.write_bytes(csv_bytes(rows()))
    with pytest.raises(UserError, match="upload limit"):
        load_corpus(path, max_bytes=100)
    assert load_corpus(path).name == "c"


def test_empty_paste():
    with pytest.raises(UserError):
        read_pasted("  \n")


# ---------------------------------------------------------------- columns


def test_detects_known_names_case_insensitively():
    df = pd.DataFrame({"ID": [1, 2], "Headline": ["a", "b"], "IS_SARCASTIC": [0, 1], "Fold": ["train", "test"]})
    assert detect_columns(df) == Columns(text="Headline", label="IS_SARCASTIC", split="Fold")


def test_guesses_single_string_and_remaining_column():
    df = pd.DataFrame({"id": range(4), "review_body": ["a", "b", "c", "d"], "stars": [1, 2, 1, 2]})
    assert detect_columns(df) == Columns(text="review_body", label="stars", split=None)


def test_fold_column_without_train_is_not_a_split():
    df = pd.DataFrame({"text": ["a", "b"], "label": [0, 1], "fold": [0, 1]})
    assert detect_columns(df).split is None


def test_overrides_win_and_missing_override_lists_columns():
    df = pd.DataFrame({"text": ["a"], "title": ["b"], "label": [0], "topic": ["x"]})
    assert detect_columns(df, text_col="TITLE", label_col="topic") == Columns("title", "topic", None)
    with pytest.raises(UserError, match="text, title, label, topic"):
        detect_columns(df, text_col="body")


def test_ambiguous_or_missing_columns():
    with pytest.raises(UserError, match="--text-col"):
        detect_columns(pd.DataFrame({"text1": ["a"], "text2": ["b"], "label": [0]}))
    with pytest.raises(UserError, match="--label-col"):
        detect_columns(pd.DataFrame({"text": ["a", "b"], "x": [0, 1], "y2": [1, 0]}))
    with pytest.raises(UserError, match="both"):
        detect_columns(pd.DataFrame({"text": ["a"], "label": [0]}), text_col="text", label_col="text")


def test_numeric_text_column_rejected():
    df = rows()
    with pytest.raises(UserError, match="numbers, not texts"):
        build_corpus(df.assign(n=range(len(df))), Columns("n", "label", None), "t")


# ---------------------------------------------------------------- labels and cleaning


def test_continuous_float_labels_rejected():
    df = rows().assign(label=np.linspace(0, 1, 20))
    with pytest.raises(UserError, match="continuous score"):
        corpus_of(df)


def test_whole_float_labels_with_nan_become_ints():
    data = "text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(20)) + "t20,\n  ,1\n"
    df, _ = read_table(data.encode(), "a.csv")
    assert df["label"].dtype == float
    c = corpus_of(df)
    assert c.classes == ["0", "1"]
    assert (c.report.rows_read, c.report.rows_kept) == (22, 20)
    assert (c.report.empty_dropped, c.report.missing_label_dropped) == (1, 1)


def test_int_labels_sorted_numerically_and_string_labels():
    df = pd.DataFrame({"text": [f"t{i}" for i in range(30)], "label": [2, 10, 1] * 10})
    c = corpus_of(df)
    assert c.classes == ["1", "2", "10"] and c.train_labels.dtype == np.int64
    c = corpus_of(rows(classes=("b", "a", "c")))
    assert c.classes == ["a", "b", "c"]
    assert [c.classes[i] for i in c.test_labels] == ["b", "a", "c"]  # one per class, in file order


def test_texts_are_stripped():
    df = rows().assign(text=lambda d: "  " + d["text"] + "\t")
    c = corpus_of(df)
    assert all(t == t.strip() for t in c.train_texts + c.test_texts)


def test_one_class_and_too_few_rows():
    with pytest.raises(UserError, match="one class"):
        corpus_of(rows(classes=("a",)))
    with pytest.raises(UserError, match="usable rows"):
        corpus_of(rows(n_per_class=2))
    with pytest.raises(UserError, match="only one row"):
        corpus_of(pd.concat([rows(), pd.DataFrame({"text": ["lonely"], "label": ["z"]})]))
    with pytest.raises(UserError, match="too few"):
        corpus_of(rows(n_per_class=2, classes=tuple("abcdef")))
    with pytest.raises(UserError, match="has both a text and a label"):
        corpus_of(pd.DataFrame({"text": [""] * 12, "label": ["a"] * 12}))


def test_duplicates_counted_and_optionally_dropped():
    df = pd.concat([rows(), rows().head(3), pd.DataFrame({"text": ["text number 0 about pos"], "label": ["neg"]})])
    kept = corpus_of(df)
    assert (kept.report.duplicates, kept.report.duplicates_dropped, kept.report.rows_kept) == (4, 0, 24)
    assert any("different labels" in w for w in kept.report.warnings)
    dropped = corpus_of(df, drop_duplicates=True)
    assert (dropped.report.duplicates, dropped.report.duplicates_dropped, dropped.report.rows_kept) == (4, 4, 20)


# ---------------------------------------------------------------- splits


def test_stratified_split_is_90_10_and_deterministic():
    df = rows(n_per_class=50, classes=("a", "b", "c", "d"))
    first, second = corpus_of(df), corpus_of(df.copy())
    assert (len(first.train_texts), len(first.test_texts)) == (180, 20)
    assert np.bincount(first.test_labels).tolist() == [5, 5, 5, 5]
    assert first.target_split == "holdout" and first.report.split_source == "stratified 90:10, seed 0"
    assert first.test_texts == second.test_texts and first.fingerprint == second.fingerprint
    assert not set(first.train_texts) & set(first.test_texts)


def test_fingerprint_changes_with_labels():
    df = rows()
    flipped = df.assign(label=df["label"].map({"pos": "neg", "neg": "pos"}))
    assert corpus_of(df).fingerprint != corpus_of(flipped).fingerprint


@pytest.mark.parametrize("target_name, expected", [("test", "test"), ("validation", "validation"),
                                                   ("dev", "validation"), ("TRIAL", "validation")])  # SICK's dev set
def test_split_column_honoured(target_name, expected):
    df = rows(n_per_class=10).assign(split=["train"] * 8 + [target_name] * 2 + ["train"] * 8 + [target_name] * 2)
    c = corpus_of(df)
    assert (len(c.train_texts), len(c.test_texts), c.target_split) == (16, 4, expected)
    assert c.report.split_source == "split column 'split'"


def test_test_preferred_over_validation_and_unused_rows_reported():
    df = rows(n_per_class=10).assign(split=(["train"] * 6 + ["validation"] * 2 + ["TEST "] * 2) * 2)
    c = corpus_of(df)
    assert (len(c.test_texts), c.target_split) == (4, "test")
    assert any("4 'validation'" in w for w in c.report.warnings)


def test_split_column_without_targets_falls_back_with_warning():
    df = rows(n_per_class=20).assign(split="train")
    c = corpus_of(df)
    assert (len(c.train_texts), len(c.test_texts), c.target_split) == (36, 4, "holdout")
    assert any("held out" in w for w in c.report.warnings)


def test_split_override_without_train_rows():
    df = rows().assign(part="x")
    with pytest.raises(UserError, match="no labelled 'train' rows"):
        build_corpus(df, detect_columns(df, split_col="part"), "t")


def test_report_and_summary_are_json_ready():
    c = corpus_of(rows())
    json.dumps(c.report.as_dict())
    s = c.summary()
    json.dumps(s)
    assert (s["rows_train"], s["rows_test"], s["n_classes"]) == (18, 2, 2)


# ---------------------------------------------------------------- demo files


def test_demo_corpus_meets_spec():
    df = pd.read_csv(demo_corpus_path())
    assert list(df.columns) == ["text", "label"] and len(df) >= 600 and df["label"].nunique() >= 3
    words = df["text"].str.split().str.len()
    assert words.between(5, 25).all() and df["text"].nunique() == len(df)
    assert demo_corpus_path().stat().st_size < 300_000
    c = load_corpus(demo_corpus_path())
    assert c.report.warnings == [] and len(c.classes) >= 3


def test_demo_documents_meet_spec():
    df = pd.read_csv(demo_documents_path())
    assert list(df.columns) == ["text", "label"] and len(df) >= 150
    for doc in df["text"]:
        sentences = [s.strip() for s in doc.split(".")]
        assert sum(100 <= len(s) <= 250 for s in sentences) >= 4
    assert demo_documents_path().stat().st_size < 300_000


def test_demo_files_are_reproducible(tmp_path):
    corpus_path, documents_path = demo.write_demo(tmp_path)
    assert corpus_path.read_bytes() == demo_corpus_path().read_bytes()
    assert documents_path.read_bytes() == demo_documents_path().read_bytes()


# ---------------------------------------------------------------- real data (read only)


def test_real_sst2_uses_validation_targets():
    c = load_corpus(shared("sst2.csv"))
    assert (len(c.train_texts), len(c.test_texts), c.target_split) == (67_349, 872, "validation")
    assert c.classes == ["0", "1"]


def test_real_trec_six_classes_with_test_split():
    c = load_corpus(shared("trec.csv"))
    assert (len(c.classes), len(c.test_texts), c.target_split) == (6, 500, "test")


def test_load_documents_needs_no_labels(tmp_path):
    path = tmp_path / "docs.csv"
    path.write_text("document\nFirst doc. Second sentence.\n\n  \nAnother doc.\n", encoding="utf-8")
    assert load_documents(path) == ["First doc. Second sentence.", "Another doc."]
    with pytest.raises(UserError, match="no text column named"):
        load_documents(path, text_col="body")


def _repeating_table() -> pd.DataFrame:
    """40 train rows of which 6 repeat a text (4 of those texts under another label), 10 test rows with one repeat,
    and 12 rows of a split no run uses, all repeats."""
    rows = [{"text": f"train text {i}", "label": "ab"[i % 2], "split": "train"} for i in range(34)]
    rows += [{"text": f"train text {i}", "label": "ab"[(i + (i < 4)) % 2], "split": "train"} for i in range(6)]
    rows += [{"text": f"test text {i}", "label": "ab"[i % 2], "split": "test"} for i in range(9)]
    rows += [{"text": "test text 0", "label": "a", "split": "test"}]
    rows += [{"text": "spare", "label": "a", "split": "unused"} for _ in range(12)]
    return pd.DataFrame(rows)


def test_duplicates_are_counted_per_split_a_run_reads_train_first():
    """Issue 51: the Corpus page said 52 duplicates over the whole file, a split no run uses included; the training
    split's count (31 there, 30 of them with conflicting labels) is the one that matters."""
    df = _repeating_table()
    corpus = build_corpus(df, detect_columns(df), name="t")
    report = corpus.report
    assert report.duplicates == 6 + 1 + 11  # the whole file, as drop_duplicates drops them
    assert report.duplicates_by_split == {"train": 6, "test": 1}
    assert report.conflicting_by_split == {"train": 4, "test": 0}
    assert ("4 texts of the train split appear more than once with different labels; check them or drop "
            "duplicates.") in report.warnings
