"""The table every corpus kind is read through: bytes or a path to a DataFrame (encodings, delimiter sniffing, JSON,
Parquet, size limits), column-name checks, text / label / split cleaning, the seeded hold-out and the normalisation
leakage compares texts by.

Everything a user can get wrong here ends in a one-sentence `UserError`; no pandas or codec traceback reaches the page
or the CLI. A kind's own module (core.data.corpus, pairs, lists) builds its corpus from what this returns.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import UserError, shorten

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
MIN_ROWS = 10
HOLDOUT_FRACTION = 0.1
SPLIT_SEED = 0
LONG_TEXT_CHARS = 1000
LEAK_EXAMPLES = 5  # leaked texts quoted in the report
FEW_TARGETS = 30  # fewer target texts (or lists): every figure over them, and any difference of two, is rough
MAX_JSON_DEPTH = 100  # a cell nested deeper could make str() or repr() of it hit the recursion limit later
SPLIT_NAMES = ("split", "fold", "partition", "subset")
VALIDATION_NAMES = ("validation", "dev", "val", "valid", "trial")  # trial: SICK's development set (TRAIN/TRIAL/TEST)
SPLIT_VALUES = ("train", "test", *VALIDATION_NAMES)

DELIMITED = {".csv": None, ".txt": None, ".tsv": "\t", ".tab": "\t"}
JSON_EXTS = (".jsonl", ".ndjson", ".json")
PARQUET_EXTS = (".parquet", ".pq")
TABLE_EXTS = (*DELIMITED, *JSON_EXTS, *PARQUET_EXTS)  # the file names read_table reads
SNIFF_DELIMITERS = (",", "\t", ";")
SUPPORTED = ".csv, .tsv, .txt, .jsonl, .json or .parquet"
INT_RE = re.compile(r"-?\d{1,300}")  # longer digit strings are read as floats (inf, so refused): int() stops at 4,300
SURROGATE_RE = re.compile("[\ud800-\udfff]")
SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")


ROLE_FLAGS = {"text": "--text-col", "label": "--label-col"}
ROLE_CONTENTS = {"text": "texts", "label": "labels"}


class ColumnError(UserError):
    """A text or label column that was not found or cannot serve. The message (str) is the CLI's, naming its flags;
    the Corpus page words its own remedy from the parts, since its readers pick columns in a box, not a flag.

    problem: what is wrong, without a remedy. roles: the columns to choose ("text", "label"). wanted: what the right
    column holds, when one was given but cannot serve. found: what detection did find, to pre-fill the page's
    pickers.
    """

    def __init__(self, problem: str, roles: tuple[str, ...], wanted: str | None = None,
                 names: list[str] | None = None, found: dict[str, str | None] | None = None) -> None:
        self.problem, self.roles, self.wanted, self.found = problem, roles, wanted, found or {}
        listed = f" (columns: {', '.join(names)})" if names else ""
        remedy = (f"pass {ROLE_FLAGS[roles[0]]} with {wanted}" if wanted
                  else "pass " + " and ".join(f"{ROLE_FLAGS[r]} NAME" for r in roles))
        super().__init__(f"{problem}{listed}; {remedy}.")


def undetected(roles: tuple[str, ...]) -> str:
    """"Could not tell which column holds the labels" (or the texts, or both): the one wording of a failed detection,
    for every front end."""
    if len(roles) == 1:
        return f"Could not tell which column holds the {ROLE_CONTENTS[roles[0]]}"
    return f"Could not tell which columns hold the {' and the '.join(ROLE_CONTENTS[r] for r in roles)}"


# ---------------------------------------------------------------- reading


def read_table(data: bytes, filename: str, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[pd.DataFrame, list[str]]:
    """Parse an uploaded file by its extension; returns the table and any warnings about how it was read."""
    check_size(len(data), filename, max_bytes)
    if not data.strip():
        raise UserError(f"{filename} is empty; upload a table with a header row and at least a text and a label "
                        "column.")
    ext = Path(filename).suffix.lower()
    if ext in PARQUET_EXTS:
        return tidy(parse_parquet(data, filename), filename), []
    if ext not in DELIMITED and ext not in JSON_EXTS:
        raise UserError(f"{filename} has an unsupported file type '{ext or '(none)'}'; use {SUPPORTED}.")
    text, warnings = decode(data, filename)
    if ext in JSON_EXTS:
        return tidy(parse_json(text, filename), filename), warnings
    df, read_warnings = parse_delimited(text, filename, DELIMITED[ext])
    return tidy(df, filename), warnings + read_warnings


def read_pasted(text: str) -> tuple[pd.DataFrame, list[str]]:
    """Parse a table pasted into the page (CSV, TSV or semicolon-separated, with a header row)."""
    if not text or not text.strip():
        raise UserError("The pasted text is empty; paste a table with a header row such as 'text,label'.")
    check_size(len(text), "The pasted text", DEFAULT_MAX_BYTES)
    if SURROGATE_RE.search(text):
        raise UserError("The pasted text holds a lone surrogate (half of a UTF-16 pair, U+D800 to U+DFFF), which is "
                        "not a character; remove it and paste again.")
    df, warnings = parse_delimited(text.strip("\r\n"), "the pasted text", None)
    return tidy(df, "the pasted text"), warnings


def check_size(n_bytes: int, filename: str, max_bytes: int) -> None:
    if n_bytes > max_bytes:
        raise UserError(f"{filename} is {human_size(n_bytes)}, over the {human_size(max_bytes)} upload limit; "
                        "upload a smaller sample of the corpus.")


def human_size(n_bytes: int) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n_bytes} bytes"


def decode(data: bytes, filename: str) -> tuple[str, list[str]]:
    """UTF-8 (with or without BOM) or UTF-16 with BOM; anything else is read as Windows-1252/Latin-1 with a warning."""
    if data[:4] == b"PK\x03\x04":
        raise UserError(f"{filename} is a zip or Excel file, not text; save the sheet as CSV (UTF-8) and upload that.")
    text, warnings = None, []
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = try_decode(data, "utf-16")
    elif b"\x00" not in data[:65536]:
        text = try_decode(data, "utf-8-sig")
        if text is None:
            text = try_decode(data, "cp1252") or data.decode("latin-1")  # cp1252 leaves five bytes undefined
            warnings.append(f"{filename} is not valid UTF-8, so it was read as Windows-1252/Latin-1; check that "
                            "accented characters look right, or re-save the file as UTF-8.")
    if text is None or looks_binary(text):
        raise UserError(f"{filename} looks like a binary file, not text; upload a {SUPPORTED} file.")
    return text, warnings


def try_decode(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        return None


def looks_binary(text: str) -> bool:
    sample = text[:65536]
    controls = sum(1 for ch in sample if (ord(ch) < 32 and ch not in "\t\n\r\f") or 0x7f <= ord(ch) < 0xa0)
    return controls > 0.01 * max(len(sample), 1)


def sniff_delimiter(text: str) -> str:
    """The delimiter that splits the header into the most fields (ties go to the comma)."""
    header = next((line for line in text[:65536].splitlines() if line.strip()), "")
    return max(SNIFF_DELIMITERS, key=lambda d: len(next(csv.reader([header], delimiter=d), [])))


def splits_by(text: str, delimiter: str, lines: int = 20) -> bool:
    """Whether the header and the first data rows all split into the same number (2 or more) of fields by
    `delimiter`: a table saved with it, not one column whose text holds it."""
    rows = [row for row in itertools.islice(csv.reader(io.StringIO(text[:65536]), delimiter=delimiter), lines)
            if any(cell.strip() for cell in row)]
    return len(rows) > 1 and len({len(row) for row in rows}) == 1 and len(rows[0]) > 1


DELIMITER_KINDS = {",": "CSV", "\t": "TSV", ";": "semicolon-separated CSV"}
DELIMITER_NAMES = {",": "commas", "\t": "tabs", ";": "semicolons"}


def parse_delimited(text: str, source: str, sep: str | None) -> tuple[pd.DataFrame, list[str]]:
    """A delimited table: `sep` as the file name says (.tsv: tabs), or sniffed from the header (None)."""
    named = sep
    sep = sep or sniff_delimiter(text)
    kind = DELIMITER_KINDS[sep]
    try:
        # pandas renames a repeated header name ("text", "text.1"), so repeats are caught on the raw header row
        header = next((row for row in csv.reader(io.StringIO(text), delimiter=sep) if any(c.strip() for c in row)), [])
        if named and len(header) == 1 and (found := sniff_delimiter(text)) != sep and splits_by(text, found):
            raise UserError(f"{source} is read as {kind} by its name, but its header has no {DELIMITER_NAMES[sep]} "
                            f"and is separated by {DELIMITER_NAMES[found]} ({shorten(header[0], 60)}): save it "
                            f"with {DELIMITER_NAMES[sep]}, or name it .csv.")
        check_unique_names([c.strip() for c in header], source)
        # Only empty cells are missing: a text reading "NA" or "null" is still a text.
        df = pd.read_csv(io.StringIO(text), sep=sep, keep_default_na=False, na_values=[""], low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, csv.Error) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"Could not parse {source} as {kind} ({reason}); check the delimiter and quoting.") from None
    return df, multiline_warnings(text, df, source)


def multiline_warnings(text: str, df: pd.DataFrame, source: str) -> list[str]:
    """Rows whose cells hold line breaks, counted against the file's lines: a quoted text may hold line breaks, but a
    quote that is never closed silently merges every line up to the next quote into one row."""
    spans = np.zeros(len(df), dtype=bool)
    for col in df.columns:
        series = df[col]
        if pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series):
            spans |= series.map(lambda v: isinstance(v, str) and ("\n" in v or "\r" in v)).to_numpy(dtype=bool)
    if not spans.any():
        return []
    lines = sum(1 for line in LINE_BREAK_RE.split(text) if line.strip()) - 1  # less the header row
    n_spans, first = int(spans.sum()), int(np.flatnonzero(spans)[0]) + 1
    rows = f"1 row of {source} spans" if n_spans == 1 else f"{n_spans} rows of {source} span"
    return [f"{rows} several lines (first: row {first}), so "
            f"its {lines:,} lines gave {len(df):,} rows; a quoted text may hold line breaks, but a quote that is "
            "never closed merges the lines after it into one row: check those rows."]


def parse_json(text: str, filename: str) -> pd.DataFrame:
    """JSON Lines (one object per line) or a JSON array of objects."""
    if text.lstrip().startswith("["):
        try:
            records = loads_json(text, filename)
        except json.JSONDecodeError as exc:
            raise UserError(f"{filename} is not valid JSON ({exc.msg} at line {exc.lineno}); fix the file or "
                            "save it as JSON Lines.") from None
    else:
        records = []
        for n, line in enumerate(text.split("\n"), 1):  # not splitlines(): a JSON string may hold U+2028 or \x85
            if not line.strip():
                continue
            try:
                records.append(loads_json(line, f"Line {n} of {filename}"))
            except json.JSONDecodeError as exc:
                raise UserError(f"Line {n} of {filename} is not valid JSON ({exc.msg}); each line of a JSONL file "
                                "must be one JSON object.") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise UserError(f"{filename} must hold JSON objects such as {{\"text\": \"...\", \"label\": \"...\"}}, "
                        "one per line or in one array.")
    return pd.DataFrame.from_records(records)


class RepeatedKey(Exception):
    """Raised by unique_keys, the json hook, so that loads_json can say where the key was repeated."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object as a dict, refusing a repeated key: json.loads would keep the last value without a word."""
    record = dict(pairs)
    if len(record) < len(pairs):
        raise RepeatedKey(Counter(k for k, _ in pairs).most_common(1)[0][0])
    return record


def loads_json(text: str, where: str) -> object:
    """One JSON value, with one line naming `where` for what json.loads lets through or raises past JSONDecodeError:
    a repeated key, nesting too deep, a lone surrogate escape ("\\ud800", which no UTF-8 text can hold, so it
    would fail later when the texts are hashed or encoded)."""
    too_deep = UserError(f"{where} is nested too deeply (lists or objects more than {MAX_JSON_DEPTH} levels deep); "
                         "a corpus row holds plain texts and labels.")
    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError:
        raise  # the caller's message says whether a line or the file is not JSON
    except ValueError:  # Python reads no integer of more digits than sys.get_int_max_str_digits()
        raise UserError(f"{where} holds a number of more than {sys.get_int_max_str_digits():,} digits; shorten it or "
                        "store it as a string.") from None
    except RepeatedKey as exc:
        raise UserError(f"{where} repeats the key {shorten(exc.args[0])} in one object; each key may appear once "
                        "(else the last value would silently win), so rename or remove the repeat.") from None
    except RecursionError:
        raise too_deep from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and too_deep(value):
        raise too_deep
    if SURROGATE_ESCAPE_RE.search(text) and holds_surrogate(value):
        raise UserError(f"{where} holds a lone surrogate escape such as \\ud800 (half of a UTF-16 pair), which "
                        "is not a character; remove it or re-export the file as UTF-8.")
    return value


def too_deep(value: object) -> bool:
    """Whether lists or objects nest deeper than MAX_JSON_DEPTH; iterative, as they may nest nearly as deep as the
    recursion limit."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def holds_surrogate(value: object) -> bool:
    """Whether any string in a parsed JSON value, keys included, holds a lone surrogate (iterative, as above)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if SURROGATE_RE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_parquet(data: bytes, filename: str) -> pd.DataFrame:
    """Parquet through pyarrow: columns are decoded, never unpickled."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if data[:4] != b"PAR1":
        raise UserError(f"{filename} is not a Parquet file (it lacks the PAR1 header); check the file or its "
                        "extension.")
    try:
        file = pq.ParquetFile(pa.BufferReader(data))
        check_unique_names([str(n).strip() for n in file.schema_arrow.names], filename)
        table = file.read()
        for i, column in enumerate(table.columns):
            if is_binary(column.type):
                table = table.set_column(i, table.field(i).name, as_text(column, table.field(i).name, filename))
        return table.to_pandas()
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"Could not read {filename} as Parquet ({reason}); re-export the file.") from None


def is_binary(dtype) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    return any(test(dtype) for test in (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary,
                                        pa.types.is_binary_view))


def as_text(column, name: str, filename: str):
    """A Parquet bytes column as UTF-8 strings: read as they are, the texts would become "b'...'" reprs."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.cast(column, pa.string())
    except pa.ArrowException:
        raise UserError(f"Column {shorten(name)} of {filename} holds binary data that is not UTF-8 text; store the "
                        "texts as strings.") from None


def names_by_lower(names: list[str]) -> dict[str, str]:
    """Lower-cased column name -> the name as written (the first one where several differ only in case)."""
    return {n.lower(): n for n in reversed(names)}


def check_unique_names(names: list[str], source: str = "The table") -> None:
    """One line naming the repeated column names; shared by every corpus kind."""
    dupes = sorted({c or "(empty)" for c, n in Counter(names).items() if n > 1})
    if dupes:
        raise UserError(f"{source} has duplicate column names ({', '.join(dupes)}); rename them so each is unique.")


def tidy(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Column names as stripped strings; a table without rows is an error, not an empty corpus."""
    df = df.rename(columns=lambda c: str(c).strip())
    check_unique_names(list(df.columns), source)
    if len(df.columns) == 0 or len(df) == 0:
        raise UserError(f"{source} has no data rows; it needs a header row followed by one row per text.")
    return df


def resolve_column(names: list[str], wanted: str, role: str) -> str:
    if wanted in names:
        return wanted
    folded = [n for n in names if n.lower() == wanted.strip().lower()]
    if len(folded) == 1:
        return folded[0]
    raise UserError(f"There is no {role} column named '{wanted}'; the columns are: {', '.join(names)}.")


def known_columns(names: list[str], known: tuple[str, ...], taken: set) -> list[str]:
    """Columns whose lower-cased name is in `known`, in the priority order of `known`."""
    by_lower = {n.lower(): n for n in reversed(names) if n not in taken}
    return [by_lower[k] for k in known if k in by_lower]


def is_split_column(series: pd.Series) -> bool:
    """A column of split names; one without 'train' rows is then refused, not ignored for a 90:10 split."""
    return bool(clean_splits(series).isin(SPLIT_VALUES).any())


def is_text_like(series: pd.Series) -> bool:
    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        return False
    values = series.dropna()
    return len(values) > 0 and values.map(lambda v: isinstance(v, str)).mean() > 0.9


def guess_text_column(df: pd.DataFrame, taken: set) -> str | None:
    candidates = [str(c) for c in df.columns if c not in taken and is_text_like(df[c])]
    return candidates[0] if len(candidates) == 1 else None


def guess_label_column(df: pd.DataFrame, taken: set) -> str | None:
    """The one remaining column, ignoring ID-like columns whose values are all different."""
    rest = [str(c) for c in df.columns if c not in taken and not holds_nested(df[c])]
    if len(rest) > 1:
        rest = [c for c in rest if df[c].nunique(dropna=True) < len(df)]
    return rest[0] if len(rest) == 1 else None


def few_targets_warning(n: int, what: str) -> str | None:
    """A warning where fewer than FEW_TARGETS target texts or lists score a model, with how wide a share's 95%
    interval is there (near 50%, normal approximation); `what` names them ("test texts")."""
    if n >= FEW_TARGETS:
        return None
    half = 100 * 1.96 * math.sqrt(0.25 / max(n, 1))
    return (f"Only {n} {what} score a model, so every figure over them is rough: an accuracy near 50% is known to "
            f"about ±{half:.0f} points, and a difference between two models is given no interval below 10; "
            f"{FEW_TARGETS} or more make them dependable.")


def clean_texts(series: pd.Series, col: str) -> pd.Series:
    if len(series) and series.map(is_missing).all():  # pandas reads an all-empty column as numbers (NaN)
        raise UserError(f"Column '{col}' is empty: no row has a text in it.")
    if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        raise ColumnError(f"Column '{col}' holds numbers, not texts", ("text",),
                          wanted="the column that holds the texts")
    reject_nested(series, col)
    return series.map(lambda v: "" if is_missing(v) else str(v).strip()).astype(object)


def clean_labels(series: pd.Series, col: str) -> pd.Series:
    """Labels as strings (None where missing); whole-number floats such as 1.0 become "1"."""
    reject_nested(series, col)
    if pd.api.types.is_bool_dtype(series):
        return series.map(lambda v: None if is_missing(v) else str(bool(v))).astype(object)
    if pd.api.types.is_integer_dtype(series):  # kept exact: floats would round ids beyond 2**53
        return series.map(lambda v: None if is_missing(v) else str(int(v))).astype(object)
    if pd.api.types.is_numeric_dtype(series):
        return numeric_labels(series.astype(float), col)
    as_str = series.map(lambda v: None if is_missing(v) or marks_missing(str(v)) else str(v).strip()).astype(object)
    present = as_str.notna()
    if present.any() and as_str[present].map(lambda v: INT_RE.fullmatch(v) is not None).all():
        return as_str.map(lambda v: None if is_missing(v) else str(int(v))).astype(object)  # exact, as above
    numbers = pd.to_numeric(as_str[present], errors="coerce")
    if present.any() and numbers.notna().all():
        return numeric_labels(pd.to_numeric(as_str, errors="coerce").astype(float), col)
    return as_str


def numeric_labels(values: pd.Series, col: str) -> pd.Series:
    present = values.dropna()
    if not np.isfinite(present).all() or not (present == np.round(present)).all():
        example = next(v for v in present if not math.isfinite(v) or v != round(v))
        raise ColumnError(f"Column '{col}' looks like a continuous score, not a class label (e.g. {example:g})",
                          ("label",), wanted="a column of class names or whole numbers")
    return values.map(lambda v: None if math.isnan(v) else str(int(v))).astype(object)


def leak_text(text: str) -> str:
    """A text as leakage compares it: Unicode-normalised (NFKC), accents removed, case-folded, runs of whitespace made
    one space. An uncased model reads "GOOD FILM", "good  film" and "gööd film" as one text (its tokenizer lower-cases
    and strips accents), so a test text that is a training text in other case, spacing or accents is scored by
    memory as much as an exact repeat (kNN 0.86 with such leaks, 0.64 without)."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    bare = unicodedata.normalize("NFC", ACCENTS.sub("", decomposed))
    return " ".join(bare.casefold().split())


ACCENTS = re.compile("[\u0300-\u036f]")  # the combining diacritics of Latin, Greek and Cyrillic letters; not kana's
# voicing marks, which change the word ("ガ" is not "カ")


def long_texts(texts: pd.Series, warnings: list[str]) -> None:
    """Warn of texts the encoder will likely truncate, in every corpus kind (a pair or list file's too)."""
    n_long = int(texts.str.len().gt(LONG_TEXT_CHARS).sum())
    if n_long:
        warnings.append(f"{n_long:,} texts are longer than {LONG_TEXT_CHARS:,} characters and may be truncated by "
                        "the encoder (most read 256 to 512 tokens).")


def dropped_rows(missing: np.ndarray, rows: int, what: str, column: str, warnings: list[str],
                 markers: Sequence[str] = ()) -> None:
    """Say how many rows were dropped for lacking `what` (a label, a score) in `column`: rows must never vanish from
    the counts without a word, as those with an empty text do not. `markers`: the missing-value markers read as
    no label."""
    n = int(missing.sum())
    if n:
        marked = f" or a missing-value marker ({', '.join(repr(m) for m in markers)})" if markers else ""
        warnings.append(f"{n:,} of {rows:,} rows dropped because their {what} in '{column}' is empty{marked}.")


def check_target_values(splits: pd.Series | None, missing: np.ndarray, keep: np.ndarray, what: str, column: str,
                        split_col: str | None) -> None:
    """A file whose test (or validation) rows all lack `what` was told its split column "has no 'test' rows" and
    had 10 % of its training rows held out in their place; say what is wrong instead."""
    if splits is None:
        return
    targets = np.isin(splits.to_numpy(dtype=object), ("test", *VALIDATION_NAMES))
    if targets.any() and not (targets & keep).any() and (targets & missing).any():
        raise UserError(f"The {int(targets.sum()):,} rows that '{split_col}' marks as test or validation all lack a "
                        f"{what} in '{column}', so there is nothing to evaluate on: fill in their {what}s, or leave "
                        f"out the split column to hold out {split_ratio().split(':')[1]} % of the other rows.")


def clean_splits(series: pd.Series) -> pd.Series:
    return series.map(lambda v: "" if is_missing(v) else str(v).strip().lower()).astype(object)


# Labels a spreadsheet or pandas writes for a missing value: read as no label (dropped and counted, with the markers
# named), not as a class of their own. Texts keep them ("NA" can be a text).
MISSING_LABELS = frozenset({"nan", "none", "null", "n/a", "#n/a", "<na>", "-", "?"})


def marks_missing(label: str) -> bool:
    return label.strip() == "" or label.strip().casefold() in MISSING_LABELS


def missing_markers(series: pd.Series) -> list[str]:
    """The missing-value markers (MISSING_LABELS) a label column holds, as written, so a drop can name them."""
    return sorted({v.strip() for v in series if isinstance(v, str) and v.strip().casefold() in MISSING_LABELS})


def is_missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def holds_nested(series: pd.Series) -> bool:
    return series.dtype == object and bool(series.map(lambda v: isinstance(v, (list, dict, np.ndarray))).any())


def reject_nested(series: pd.Series, col: str) -> None:
    if holds_nested(series):
        raise UserError(f"Column '{col}' holds lists or objects, not single values; use one text and one label per "
                        "row.")


def kept_text(kept: int, used: int, unit: str) -> str:
    """"9,840 pairs (9,345 in train and test)": the rows kept, as the report's card counts them, and how many of them
    the train and target splits use where a split is left unused (a validation split beside a test split)."""
    return f"{kept:,} {unit}" + (f" ({used:,} in train and test)" if used != kept else "")


def count_card(unit: str, n_train: int, n_target: int, target_split: str) -> tuple[str, str, str]:
    """The Home and Corpus pages' first card of every kind: its items in all, then per split."""
    return unit, f"{n_train + n_target:,}", f"{n_train:,} train, {n_target:,} {target_split}"


def sorted_classes(classes: set[str]) -> list[str]:
    """Numeric order when every label is an integer (2 before 10), otherwise alphabetical."""
    if all(INT_RE.fullmatch(c) for c in classes):
        return sorted(classes, key=int)
    return sorted(classes)


def target_warnings(train_labels: np.ndarray, target_labels: np.ndarray, target_split: str) -> list[str]:
    """Target figures that cannot mean what they say: too few target texts, or target classes no training text has
    (no neighbour can carry their label, so P@k is 0 and the kNN vote wrong for each of their texts)."""
    out = [w] if (w := few_targets_warning(len(target_labels), f"{target_split} texts")) else []
    unseen = sorted(set(target_labels.tolist()) - set(train_labels.tolist()), key=str)
    if unseen:
        n = int(np.isin(target_labels, unseen).sum())
        named = ", ".join(shorten(str(c), 40) for c in unseen[:5]) + (", …" if len(unseen) > 5 else "")
        out.append(f"{len(unseen)} {target_split} class{'es have' if len(unseen) > 1 else ' has'} no training text "
                   f"({named}; {n:,} {target_split} text{'s' if n > 1 else ''}): no neighbour can carry "
                   f"{'their labels' if len(unseen) > 1 else 'its label'}, so P@k and the kNN vote cannot be right "
                   "for those texts; give the class training rows, or leave it out.")
    return out


def split_duplicates(texts: pd.Series, labels: pd.Series, parts: dict[str, np.ndarray]
                     ) -> tuple[dict[str, int], dict[str, int]]:
    """Per split (name -> its rows), the rows that repeat an earlier text of the same split, and the texts it holds
    under more than one label: counted where a run reads them, not over rows of a split no run uses."""
    repeats, conflicting = {}, {}
    for name, rows in parts.items():
        part = pd.DataFrame({"t": texts.iloc[rows].to_numpy(), "l": labels.iloc[rows].to_numpy()})
        repeats[name] = int(part["t"].duplicated().sum())
        conflicting[name] = int(part.groupby("t", sort=False)["l"].nunique().gt(1).sum())
    return repeats, conflicting


def conflict_warnings(conflicting: dict[str, int]) -> list[str]:
    """The texts a split holds under several labels, in words, the first split (train) first; [] where none does."""
    if not any(conflicting.values()):
        return []
    (first, n), *rest = conflicting.items()
    others = ", ".join(f"{m:,} in the {name} split" for name, m in rest if m)
    return [f"{n:,} texts of the {first} split appear more than once with different labels"
            + (f" ({others})" if others else "") + "; check them or drop duplicates."]


def rows_key(*parts: object, rows: Iterable[tuple]) -> str:
    """A corpus's content as a set of rows (each a tuple of its split and values), whatever their order: published
    figures are kept under it, so the same rows in another order keep theirs (a corpus's `content_key`)."""
    digests = sorted(hashlib.sha256("\x1f".join(map(str, row)).encode("utf-8", "surrogatepass")).digest()
                     for row in rows)
    return hashlib.sha256("\x1e".join(map(str, parts)).encode("utf-8") + b"".join(digests)).hexdigest()[:16]


def listed_names(classes: list[str], limit: int, code: Callable[[str], str]) -> str:
    """The first `limit` class names, formatted by `code`, and how many more there are."""
    return ", ".join(map(code, classes[:limit])) + (f", … (+{len(classes) - limit})" if len(classes) > limit else "")


def split_ratio() -> str:
    held = round(HOLDOUT_FRACTION * 100)
    return f"{100 - held}:{held}"


def seeded_holdout(rows: np.ndarray, stratify: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The seeded 90:10 split of a file without a split column (keeping class proportions when `stratify` gives
    each row's class); both halves in file order. scikit-learn takes 1.3 s to import: only a file that needs it."""
    from sklearn.model_selection import train_test_split

    train, held = train_test_split(rows, test_size=HOLDOUT_FRACTION, random_state=SPLIT_SEED, stratify=stratify)
    return np.sort(train), np.sort(held)


def train_on_validation(splits: np.ndarray, col: str, warnings: list[str]) -> np.ndarray:
    """Split values where, in a file with 'test' and 'validation' rows but no 'train' rows (SNLI's published
    splits), the validation rows become the training rows, said in a warning; other files are returned as they are.
    Pair and list corpora use it: they can learn from validation data, while a labelled corpus names its train
    rows."""
    validation = np.isin(splits, VALIDATION_NAMES)
    if np.any(splits == "train") or not np.any(splits == "test") or not validation.any():
        return splits
    warnings.append(f"Split column '{col}' has no 'train' rows, so the {int(validation.sum()):,} validation rows "
                    "train and the 'test' rows are the targets.")
    return np.where(validation, "train", splits)


def split_by_column(splits: np.ndarray, col: str, warnings: list[str],
                    holdout: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                    how: str, picks: str | None = None) -> tuple[np.ndarray, np.ndarray, str, str]:
    """(train rows, target rows, target split name, where the split came from) from a split column: 'train' rows
    train; 'test' rows are the targets, else the validation rows, else `holdout(train rows)` ('how' names it in the
    warning). Rows with any other split value are reported as unused, but for `picks`, the split a run picks its
    checkpoint on (select_split). Shared by labelled and pair corpora."""
    train = np.flatnonzero(splits == "train")
    test = np.flatnonzero(splits == "test")
    validation = np.flatnonzero(np.isin(splits, VALIDATION_NAMES))
    used = {"train", "test"} if test.size else {"train", *VALIDATION_NAMES} if validation.size else {"train"}
    unused = Counter(s for s in splits if s not in used and s != picks)
    if unused:
        listed = ", ".join(f"{n:,} {shorten(s or '(empty)')}" for s, n in sorted(unused.items()))
        warnings.append(f"Rows of split column '{col}' not used for training or evaluation: {listed}.")
    if test.size:
        return train, test, "test", f"split column '{col}'"
    if validation.size:
        return train, validation, "validation", f"split column '{col}'"
    warnings.append(f"Split column '{col}' has no 'test' or 'validation' rows, so a {how} "
                    f"{round(HOLDOUT_FRACTION * 100)}% of the 'train' rows is held out instead.")
    train, target = holdout(train)
    return train, target, "holdout", f"{how} {split_ratio()} of the '{col}' train rows, seed {SPLIT_SEED}"


def read_file(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[pd.DataFrame, list[str]]:
    """A file as a table, with clear errors for a missing, unreadable or oversized file."""
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise UserError(f"Corpus file {path} {what}; check the path.")
    check_size(path.stat().st_size, path.name, max_bytes)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"Could not read {path} ({exc.strerror}); check its permissions.") from None
    return read_table(data, path.name, max_bytes)
