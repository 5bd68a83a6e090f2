"""A table's content as a run reads it, whatever file format holds it: a fingerprint of each column's values and
one of the whole. The CSV a user uploads and the app's Parquet copy of its columns are then one corpus, an exported
config names its corpus by this content (not by a file's bytes), and a config given another file can say what
differs: rows, columns or values. The pages save an upload's columns under its content's name (persist_table), so a
background run and a later rerun read exactly those rows."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from core.data.table import TABLE_EXTS, read_file, rows_key
from core.errors import UserError
from core.storage import corpora_dir, write_atomic

COLUMN_DIGITS = 16  # hex digits of a column's fingerprint: enough to tell columns apart, short in a config
_MISSING = "\x00"  # a missing cell, which no text read from a file holds, so the text "nan" stays a value


ORDER_ONLY = "the same rows in another order"  # Content.difference's words where only the row order differs
SWAPPED = "the same values with the columns"  # and where two columns' values are swapped


def column_fingerprint(values: pd.Series) -> str:
    """The values of one column as text, missing cells apart: a CSV's 1 and a JSONL's "1" are the same value, as a
    run reads them as the same label."""
    missing = values.isna().to_numpy()
    cells = (_MISSING if gone else str(value) for value, gone in zip(values.tolist(), missing))
    return hashlib.sha256("\x1e".join(cells).encode("utf-8", "surrogatepass")).hexdigest()[:COLUMN_DIGITS]


def rowset_fingerprint(df: pd.DataFrame) -> str:
    """The table's rows as a multiset, whatever their order (core.data.table.rows_key over each row's cells, columns
    by name): the same rows in another order have the same rowset, so another order is told from other values."""
    names = sorted(map(str, df.columns))
    cells = [df[name].astype(object).where(df[name].notna(), _MISSING).map(str).tolist() for name in names]
    return rows_key(rows=zip(*cells))


@dataclass(frozen=True)
class Content:
    """The rows and per-column fingerprints of a table (or of the columns of it a run read), and its rows as a
    multiset (`rowset`; None in an entry written before it was recorded)."""

    rows: int
    columns: dict[str, str]  # column name -> column_fingerprint
    rowset: str | None = None

    @classmethod
    def of(cls, df: pd.DataFrame, rowset: bool = True) -> Content:
        """`rowset` False leaves the multiset out where only the fingerprint is asked for (naming a saved copy)."""
        return cls(len(df), {str(name): column_fingerprint(df[name]) for name in df.columns},
                   rowset_fingerprint(df) if rowset else None)

    @classmethod
    def of_file(cls, path: str | Path, columns: Iterable[str] | None = None,
                renamed: dict[str, str] | None = None) -> Content:
        """The content of a file as a corpus loader reads it (a one-line UserError when it cannot be read); of the
        `columns` it has among those named, when given, as a run that read only them records it. `renamed` maps a
        named column to the file's column that plays its role now (a re-run's --text1-col sentence_A for a run that
        read 'text1'), so a file is compared role by role, whatever its own names."""
        df = read_file(Path(path))[0]
        if columns is None:
            return cls.of(df)
        sources = {name: (renamed or {}).get(name, name) for name in columns}
        return cls.of(pd.DataFrame({name: df[source].to_numpy() for name, source in sources.items()
                                    if source in df.columns}, index=df.index))

    @property
    def fingerprint(self) -> str:
        """The whole table's fingerprint (64 hex digits): its rows and its columns by name, in any order."""
        listed = "\n".join(f"{name}\x1f{digest}" for name, digest in sorted(self.columns.items()))
        return hashlib.sha256(f"{self.rows}\n{listed}".encode("utf-8", "surrogatepass")).hexdigest()

    def entry(self) -> dict:
        """The content as a portable config names it, beside the file's name."""
        return {"content": self.fingerprint, "rows": self.rows, "columns": dict(self.columns),
                **({"rowset": self.rowset} if self.rowset else {})}

    def difference(self, expected: Content) -> str:
        """What differs from the `expected` content, in words ('19,990 rows, not 20,000'; 'the same rows in another
        order'; 'the columns 'text1' and 'text2' swapped'); '' when it is the same (columns the expected content
        lacks are ignored)."""
        missing = [name for name in expected.columns if name not in self.columns]
        if missing:
            return f"it lacks the column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}"
        if self.rows != expected.rows:
            return f"it has {self.rows:,} row{'' if self.rows == 1 else 's'}, not {expected.rows:,}"
        other = [name for name, digest in expected.columns.items() if self.columns[name] != digest]
        if not other:
            return ""
        if expected.rowset is not None and self.rowset == expected.rowset:  # both over the expected columns
            return ORDER_ONLY
        if len(other) == 2 and (self.columns[other[0]], self.columns[other[1]]) == (
                expected.columns[other[1]], expected.columns[other[0]]):
            return f"{SWAPPED} {other[0]!r} and {other[1]!r} swapped"
        return f"other values in the column{'s' if len(other) > 1 else ''} {', '.join(map(repr, other))}"


def saved_copy_path(fingerprint: str) -> Path:
    """Where the pages keep the copy of a table with this content (Content.fingerprint)."""
    return corpora_dir() / f"{fingerprint[:COLUMN_DIGITS]}.parquet"


def persist_table(df: pd.DataFrame, columns: Iterable[str | None]) -> Path:
    """The named columns of an in-memory table (an upload, a paste), under their own names, as a Parquet file that a
    run's TrainConfig.corpus can name, with the run's column settings naming the same columns in the original file.
    Written once per content (temp file, then rename): the same columns give the same path."""
    names = list(dict.fromkeys(c for c in columns if c is not None))
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise UserError(f"There is no column named '{missing[0]}'; the columns are: {', '.join(map(str, df.columns))}.")
    frame = df[names].reset_index(drop=True)
    path = saved_copy_path(Content.of(frame, rowset=False).fingerprint)
    if not path.exists():
        write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))
    return path


RECENT_FILE = "recent.json"  # in the corpora folder: the uploads the pages kept, newest first
RECENT_KEPT = 10


def remember_upload(df: pd.DataFrame, file_name: str) -> Path:
    """Keep an uploaded table whole (every column, persist_table) and list it under the user's file name among the
    recent corpora, newest first (RECENT_KEPT of them): a browser reload loses an upload, and the Corpus page offers
    these to pick again."""
    path = persist_table(df, [str(c) for c in df.columns])
    entries = [e for e in recent_uploads() if Path(e["path"]) != path]
    entries.insert(0, {"name": file_name, "path": str(path)})
    target = corpora_dir() / RECENT_FILE
    write_atomic(target, lambda tmp: tmp.write_text(json.dumps(entries[:RECENT_KEPT]), encoding="utf-8"))
    return path


def recent_uploads() -> list[dict[str, str]]:
    """The recent corpora ({name, path}), newest first, those whose copy still exists; [] for none or a list that
    cannot be read (it is only a convenience: nothing is lost with it)."""
    try:
        entries = json.loads((corpora_dir() / RECENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)
            and isinstance(e.get("path"), str) and Path(e["path"]).is_file()]


def given_file_name(recorded: str | None, path: str | Path) -> str:
    """The name of a corpus file as the user gave it: the name a run recorded for it where that names a table file
    (an upload's, 'emotion.csv'), else the file's own (a pasted table's copy, or a file given by path)."""
    if recorded and Path(recorded).suffix.lower() in TABLE_EXTS:
        return recorded
    return Path(path).name
