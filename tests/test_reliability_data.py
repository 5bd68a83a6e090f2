"""Issue 12, corpus readers: inputs that gave a traceback or silently changed the data now give one clear line
(or a warning in the report), and property tests that feed the readers arbitrary bytes and tables."""

import io
import json
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.data.corpus import Corpus, build_corpus, detect_columns
from core.data.kinds import load_any
from core.data.lists import ListCorpus
from core.data.pairs import PairCorpus
from core.data.table import read_pasted, read_table
from core.errors import UserError
from tests.conftest import no_errors


def records(n: int = 30) -> list[dict]:
    return [{"text": f"text number {i}", "label": "ab"[i % 2]} for i in range(n)]


def jsonl(rows: list[dict]) -> bytes:
    return "\n".join(json.dumps(r) for r in rows).encode()


def csv_rows(n: int, split=None) -> bytes:
    """A labelled CSV of n rows; `split(i)` gives row i's split value when given."""
    header = "text,label" + (",split" if split else "")
    lines = [f"text number {i},{'ab'[i % 2]}" + (f",{split(i)}" if split else "") for i in range(n)]
    return "\n".join([header, *lines]).encode()


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def corpus_from(data: bytes, filename: str) -> Corpus:
    df, warnings = read_table(data, filename)
    return build_corpus(df, detect_columns(df), "t", warnings=warnings)


def one_line_error(match: str, fn, *args) -> None:
    with pytest.raises(UserError, match=match) as info:
        fn(*args)
    assert "\n" not in str(info.value)


def load_file(tmp_path: Path, name: str, data: bytes):
    """What `evaluate` and `train` do with a corpus file: kinds.load_any, which first reads the header."""
    path = tmp_path / name
    path.write_bytes(data)
    return load_any(path)


# ---------------------------------------------------------------- tracebacks that become one line (item 3)

SURROGATE = jsonl(records(29)) + b'\n{"text": "bad \\ud800 here", "label": "a"}'
DEEP_JSONL = jsonl(records()) + b"\n" + b"[" * 100_000 + b"]" * 100_000
DEEP_VALUE = jsonl(records()) + b'\n{"text": "x", "label": "a", "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.mark.parametrize("data, match", [(SURROGATE, "Line 30 of f.jsonl .*surrogate"),
                                         (DEEP_JSONL, "Line 31 of f.jsonl .*nested"),
                                         (DEEP_VALUE, "Line 31 of f.jsonl .*nested")])
def test_jsonl_surrogate_and_deep_nesting_are_one_line(tmp_path, data, match):
    one_line_error(match, corpus_from, data, "f.jsonl")
    one_line_error(match, load_file, tmp_path, "f.jsonl", data)


def test_json_array_surrogate_and_deep_nesting_are_one_line(tmp_path):
    array = json.dumps(records(29) + [{"text": "x", "label": "a"}]).encode().replace(b'"x"', b'"\\uDC00x"')
    one_line_error("f.json .*surrogate", load_file, tmp_path, "f.json", array)
    one_line_error("f.json .*nested", load_file, tmp_path, "f.json", b"[" * 100_000 + b"]" * 100_000)


def test_surrogate_pair_escapes_are_text():
    data = jsonl(records(29) + [{"text": "smile \U0001F600", "label": "a"}])  # json.dumps writes \ud83d\ude00
    assert b"\\ud83d\\ude00" in data
    c = corpus_from(data, "f.jsonl")
    assert "smile \U0001F600" in c.train_texts + c.test_texts


def test_jsonl_texts_may_hold_unicode_line_separators():
    """JSON Lines are split at "\\n" only: str.splitlines() also splits inside strings at U+2028 and \\x85."""
    rows = records(27) + [{"text": f"a{sep}b", "label": "a"} for sep in ("\u2028", "\x85", "\u2029")]
    c = corpus_from("\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode(), "f.jsonl")
    assert {"a\u2028b", "a\x85b", "a\u2029b"} <= set(c.train_texts + c.test_texts)


def test_pasted_lone_surrogate_is_one_line():
    pasted = "text,label\n" + "".join(f"t{i}\ud800,{i % 2}\n" for i in range(20))
    one_line_error("The pasted text holds a lone surrogate", read_pasted, pasted)


def test_upload_of_bad_jsonl_shows_one_line_in_the_corpus_page_and_a_good_one_loads(app):
    app.run()
    at = app.switch_page("app_pages/1_Corpus.py").run()
    at.radio(key="corpus_source").set_value("Upload a file").run()
    for name, data in (("lone.jsonl", SURROGATE), ("deep.jsonl", DEEP_JSONL)):
        at.file_uploader[0].upload(name, data, "application/json").run()
        assert not at.exception
        assert len(at.error) == 1 and at.error[0].value.startswith(f"Line {30 + (name == 'deep.jsonl')} of {name} ")
        assert "unexpectedly" not in at.error[0].value
    at.file_uploader[0].upload("ok.jsonl", jsonl(records()), "application/json").run()  # the new checks pass it
    no_errors(at)
    assert at.subheader[0].value.startswith("Validation report") and "ok" in at.subheader[0].value


# ---------------------------------------------------------------- silent data changes (item 4)


def test_duplicate_keys_in_a_jsonl_object_name_the_key(tmp_path):
    data = b"\n".join(b'{"text": "t%d", "label": "%s", "text": "x"}' % (i, b"ab"[i % 2:i % 2 + 1]) for i in range(30))
    one_line_error("Line 1 of f.jsonl repeats the key 'text'", corpus_from, data, "f.jsonl")
    one_line_error("Line 1 of f.jsonl repeats the key 'text'", load_file, tmp_path, "f.jsonl", data)
    array = b"[" + data.replace(b"\n", b",") + b"]"
    one_line_error("f.json repeats the key 'text'", corpus_from, array, "f.json")


@pytest.mark.parametrize("header, name", [("text,text,label", "f.csv"), ("text\ttext\tlabel", "f.tsv"),
                                          ("text;label; text", "paste")])
def test_duplicate_column_names_in_delimited_tables(header, name):
    sep = "\t" if "\t" in header else ";" if ";" in header else ","
    body = "".join(f"\na{i}{sep}b{i}{sep}{i % 2}" for i in range(30))
    if name == "paste":
        one_line_error(r"duplicate column names \(text\)", read_pasted, header + body)
    else:
        one_line_error(r"duplicate column names \(text\)", read_table, (header + body).encode(), name)


def test_duplicate_column_names_in_parquet():
    table = pa.Table.from_arrays([pa.array(["a"] * 30), pa.array(["b"] * 30), pa.array([0, 1] * 15)],
                                 names=["text", "text", "label"])
    one_line_error(r"f.parquet has duplicate column names \(text\)", read_table, parquet(table), "f.parquet")


def test_split_column_with_only_test_rows_is_an_error():
    one_line_error("Split column 'split' has no labelled 'train' rows", corpus_from,
                   csv_rows(30, split=lambda i: "test"), "f.csv")


def test_other_split_values_are_reported_as_dropped_also_with_a_holdout():
    c = corpus_from(csv_rows(60, split=lambda i: "dev2" if i % 3 == 0 else "train"), "f.csv")
    assert len(c.train_texts) + len(c.test_texts) == 40
    assert c.report.rows_read == 60
    assert any("20 'dev2'" in w and "not used" in w for w in c.report.warnings), c.report.warnings


def test_parquet_bytes_column_is_decoded_as_utf8():
    table = pa.table({"text": [f"tëxt {i}".encode() for i in range(30)], "label": [i % 2 for i in range(30)]})
    c = corpus_from(parquet(table), "f.parquet")
    assert sorted(c.train_texts + c.test_texts) == sorted(f"tëxt {i}" for i in range(30))


def test_parquet_bytes_that_are_not_utf8_are_an_error():
    table = pa.table({"text": [b"\xff\xfe" + bytes([65 + i]) for i in range(30)], "label": [i % 2 for i in range(30)]})
    one_line_error("Column 'text' of f.parquet holds binary data", read_table, parquet(table), "f.parquet")


def test_unclosed_quote_that_merges_rows_is_reported():
    lines = [f"text number {i},{'ab'[i % 2]}" for i in range(40)]
    lines[5] = '"text number 5,b'  # opened here, closed by the quote on line 10: rows 6..10 become one
    lines[9] = 'text number 9",b'
    c = corpus_from("\n".join(["text,label", *lines]).encode(), "f.csv")
    assert c.report.rows_read == 36
    assert any("40 lines" in w and "36 rows" in w and "row 6" in w for w in c.report.warnings), c.report.warnings


def test_texts_with_quoted_line_breaks_are_reported_not_refused():
    df, warnings = read_table(b'text,label\n"two\nlines",a\none line,b\n', "f.csv")
    assert df["text"].tolist() == ["two\nlines", "one line"]
    assert warnings and "3 lines" in warnings[0] and "2 rows" in warnings[0]


BIG = "1" + "0" * 400  # a JSON integer no float holds


@pytest.mark.parametrize("name, lines, match", [
    ("f.jsonl", [f'{{"text1": "a{i}", "text2": "b{i}", "score": {BIG if i == 3 else 0.5}}}' for i in range(30)],
     "Score column 'score' must hold finite numbers"),
    ("f.jsonl", [f'{{"text1": "a{i}", "text2": "b{i}", "label": {BIG if i == 3 else 0}}}' for i in range(30)],
     "Label column 'label' must hold entailment"),
    ("f.jsonl", [f'{{"list_id": {i // 3}, "rank": {BIG if i == 3 else i % 3 + 1}, "text": "t{i}"}}' for i in range(60)],
     "Rank column 'rank' must hold whole numbers"),
    ("f.csv", ["list_id,rank,text"] + [f"{i // 3},{2**63 if i == 3 else i % 3 + 1},t{i}" for i in range(60)],
     "Rank column 'rank' must hold whole numbers")])
def test_numbers_too_big_for_a_float_or_int64_are_one_line(tmp_path, name, lines, match):
    one_line_error(match, load_file, tmp_path, name, "\n".join(lines).encode())


def test_a_json_number_too_long_for_python_is_one_line():
    data = jsonl(records(29)).decode() + '\n{"text": "x", "label": ' + "1" * 5000 + "}"
    one_line_error("Line 30 of f.jsonl holds a number of more than 4,300 digits", corpus_from, data.encode(), "f.jsonl")


def test_integer_labels_beyond_float_precision_stay_distinct(tmp_path):
    """2**70 and 2**70 + 1 are the same float: read as floats, two classes would silently become one."""
    lines = [f"text number {i},{2**70 + i % 2}" for i in range(30)]
    c = load_file(tmp_path, "f.csv", "\n".join(["text,label", *lines]).encode())
    assert c.classes == [str(2**70), str(2**70 + 1)]


# ---------------------------------------------------------------- property tests

CORPUS_TYPES = (Corpus, PairCorpus, ListCorpus)
EXTS = (".csv", ".tsv", ".txt", ".jsonl", ".json", ".parquet")
NAMES = ("text", "label", "split", "text1", "text2", "score", "list_id", "rank", "Text", " label", "", "x")
CELLS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                  st.sampled_from(["train", "test", "dev2", "validation", "entailment", "a", "b", "", "NA", "1"]),
                  st.text(max_size=12))
JSON_CELLS = st.one_of(CELLS, st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.text(max_size=3), CELLS, max_size=2))
JSON_PIECES = st.sampled_from([b"{", b"}", b"[", b"]", b":", b",", b"\n", b'"', b'"text"', b'"label"', b'"text1"',
                               b'"text2"', b'"score"', b'"list_id"', b'"rank"', b'"split"', b'"train"', b'"test"',
                               b'"a"', b'"b"', b"1", b"0.5", b"null", b"true", b'"\\ud800"', b'"\\ud83d\\ude00"'])
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_result(result) -> None:
    """A valid corpus: of a known kind, hashable content, a JSON-ready summary, one-line warnings."""
    assert isinstance(result, CORPUS_TYPES)
    assert result.fingerprint
    json.dumps(result.summary())
    assert all(isinstance(w, str) and "\n" not in w for w in result.report.warnings), result.report.warnings


def corpus_or_user_error(fn, *args) -> None:
    try:
        result = fn(*args)
    except UserError as exc:
        assert str(exc) and "\n" not in str(exc), repr(str(exc))
        return
    check_result(result)


def build_labelled(data: bytes, filename: str) -> Corpus:
    df, warnings = read_table(data, filename)
    return build_corpus(df, detect_columns(df), "t", warnings=warnings)


def load_bytes(data: bytes, filename: str):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / filename
        path.write_bytes(data)
        return load_any(path)


@PROPERTY
@given(data=st.binary(max_size=400), ext=st.sampled_from(EXTS))
def test_arbitrary_bytes_give_a_corpus_or_a_user_error(data, ext):
    corpus_or_user_error(build_labelled, data, "f" + ext)
    corpus_or_user_error(load_bytes, data, "f" + ext)


@PROPERTY
@given(pieces=st.lists(JSON_PIECES, max_size=60), ext=st.sampled_from((".jsonl", ".json")))
def test_json_like_bytes_give_a_corpus_or_a_user_error(pieces, ext):
    """Arbitrary bytes seldom parse as JSON; JSON tokens in any order reach the checks after parsing."""
    data = b"".join(pieces)
    corpus_or_user_error(build_labelled, data, "f" + ext)
    corpus_or_user_error(load_bytes, data, "f" + ext)


@PROPERTY
@given(text=st.text(max_size=400))
def test_arbitrary_pasted_text_gives_a_table_or_a_user_error(text):
    try:
        df, _ = read_pasted(text)
    except UserError:
        return
    corpus_or_user_error(lambda: build_corpus(df, detect_columns(df), "t"))


TRICKY = st.sampled_from([",", ";", "\t", '"', "'", "\n", "\r\n", "\r", "\u2028", "NA", "null", "#",
                          "\\u", "\ufeff", "é", "\U0001F600", "  ", "\\n", "b'x'"])
PIECE_TEXTS = st.lists(st.one_of(TRICKY, st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=4)),
                       max_size=6).map("".join)
KINDS = (("text", "label"), ("text", "label", "split"), ("text1", "text2", "score"),
         ("text1", "text2", "label", "split"),
         ("list_id", "rank", "text"), ("list_id", "rank", "text", "split"))
VALID = {"label": st.sampled_from(["a", "b", "entailment", "neutral", "contradiction", "0", "1"]),
         "score": st.floats(0, 5),
         "split": st.sampled_from(["train", "train", "train", "test", "validation", "dev2", ""])}


@st.composite
def tables(draw) -> pd.DataFrame:
    """A table shaped like one corpus kind (list members in lists of 3), some columns with any cell values, maybe an
    extra or repeated column name: most are near-valid, so the checks past the column detection are reached."""
    names = [*draw(st.sampled_from(KINDS)), *draw(st.lists(st.sampled_from(NAMES), max_size=2))]
    n = draw(st.integers(0, 40))
    junk = draw(st.sets(st.sampled_from(names), max_size=2))
    structured = {"list_id": [i // 3 for i in range(n)], "rank": [i % 3 + 1 for i in range(n)]}
    columns = []
    for name in names:
        if name in junk or name in NAMES[8:]:
            columns.append(draw(st.lists(JSON_CELLS, min_size=n, max_size=n)))
        elif name in structured:
            columns.append(structured[name])
        else:
            columns.append(draw(st.lists(VALID.get(name, PIECE_TEXTS), min_size=n, max_size=n)))
    return pd.DataFrame(dict(enumerate(columns))).set_axis(names, axis=1)


ARROW_COLUMNS = st.sampled_from([
    pa.array([b"abc", b"\xff", None] * 8), pa.array(["x", "y", None] * 8, pa.large_string()),
    pa.array(["train", "test", "dev2"] * 8).dictionary_encode(), pa.array([b"a", b"b", b"c"] * 8).dictionary_encode(),
    pa.array([1, 2, None] * 8), pa.array([0.5, float("nan"), float("inf")] * 8), pa.array([True, False, None] * 8),
    pa.array([None] * 24, pa.null()), pa.array([["a"], [], None] * 8), pa.array([{"k": 1}] * 24),
    pa.array([0, 10**15, -1] * 8, pa.timestamp("s")), pa.array([b"ab", b"cd", b"ef"] * 8, pa.binary(2))])


@PROPERTY
@given(columns=st.lists(st.tuples(st.sampled_from(NAMES), ARROW_COLUMNS), min_size=1, max_size=4))
def test_arbitrary_parquet_columns_give_a_corpus_or_a_user_error(columns):
    table = pa.Table.from_arrays([c for _, c in columns], names=[n for n, _ in columns])
    corpus_or_user_error(build_labelled, parquet(table), "f.parquet")
    corpus_or_user_error(load_bytes, parquet(table), "f.parquet")


def table_bytes(df: pd.DataFrame, ext: str) -> bytes:
    if ext == ".parquet":
        frame = df.set_axis([f"c{i}" for i in range(df.shape[1])], axis=1).astype(str)  # one type per column
        return parquet(pa.Table.from_pandas(frame, preserve_index=False).rename_columns(list(df.columns)))
    if ext in (".jsonl", ".json"):
        rows = [dict(zip(df.columns, row)) for row in df.itertuples(index=False)]
        return (json.dumps(rows) if ext == ".json" else "\n".join(json.dumps(r) for r in rows)).encode()
    # with "\r\n" rows, cells holding "\r" are quoted too (pandas leaves a lone "\r" unquoted after "\n" rows)
    return df.to_csv(index=False, sep="\t" if ext == ".tsv" else ",", lineterminator="\r\n").encode()


@PROPERTY
@given(df=tables(), ext=st.sampled_from(EXTS))
def test_arbitrary_small_tables_give_a_corpus_or_a_user_error(df, ext):
    data = table_bytes(df, ext)
    corpus_or_user_error(build_labelled, data, "f" + ext)
    corpus_or_user_error(load_bytes, data, "f" + ext)


@PROPERTY
@given(df=tables())
def test_arbitrary_data_frames_give_a_corpus_or_a_user_error(df):
    """The app builds from a parsed table, with the columns picked in the page (here: detected)."""
    corpus_or_user_error(lambda: build_corpus(df, detect_columns(df), "t"))




@PROPERTY
@given(tails=st.lists(PIECE_TEXTS, min_size=20, max_size=30), ext=st.sampled_from(EXTS))
def test_well_formed_tables_load_with_every_text_intact(tails, ext):
    """No silent data change: whatever a text holds (quotes, delimiters, line breaks, "NA", JSON escapes), a valid
    table in any format loads with the same texts and labels (cleaning only strips surrounding whitespace)."""
    df = pd.DataFrame({"text": [f"t{i} {tail}" for i, tail in enumerate(tails)],
                       "label": ["ab"[i % 2] for i in range(len(tails))]})
    data = (("\n".join(json.dumps(r, ensure_ascii=False) for r in df.to_dict("records")).encode() if ext == ".jsonl"
             else table_bytes(df, ext)))
    corpus = load_bytes(data, "f" + ext)
    loaded = sorted(zip(corpus.train_texts + corpus.test_texts,
                        [corpus.classes[c] for c in [*corpus.train_labels, *corpus.test_labels]]))
    assert loaded == sorted(zip(df["text"].str.strip(), df["label"]))
