"""Per-session state shared by every page: the current corpus, reference model and selected run.

Pages go through these functions instead of raw st.session_state keys, so key names live in one
place, and the demo corpus is loaded on the first page view so no page has to handle "no corpus".
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from core.data.content import remember_upload
from core.data.corpus import Columns, Corpus, demo_corpus_path, detect_columns
from core.data.kinds import KINDS
from core.data.lists import ListColumns, ListCorpus
from core.data.pairs import PairColumns, PairCorpus
from core.data.table import read_pasted, read_table
from core.models.loading import DEFAULT_MODEL, resolve_model
from ui.feedback import progress_bar

_CORPUS = "corpus"
_CORPUS_KEY = "corpus_key"
_TABLE = "corpus_table"
_MODEL = "model_name"
_RUN = "run_id"
_CACHES = "session_caches"
_GENERATED = "generated_file"  # the Generate page's file for the Train page (generated())


@dataclass(frozen=True)
class Table:
    """A parsed input table, kept so its column mapping stays editable after the user leaves the page."""

    source: str  # "demo", "upload" or "paste"
    name: str
    key: str  # identifies the input's content: a new upload or paste gives a new key
    df: pd.DataFrame
    warnings: tuple[str, ...] = ()
    file: str | None = None  # the file's name as the user gave it (an upload's), which an export names; None: a paste


def default_model_name() -> str:
    """CONTRASTLAB_MODEL (tests point it at a tiny model) else the packaged default."""
    return os.environ.get("CONTRASTLAB_MODEL") or DEFAULT_MODEL


def init() -> None:
    """Fill in what every page expects; loads the demo corpus only when no corpus is loaded yet."""
    ss = st.session_state
    ss.setdefault(_MODEL, default_model_name())
    ss.setdefault(_RUN, None)
    if _CORPUS not in ss:
        table = demo_table()
        use_table(table, detect_columns(table.df), drop_duplicates=False)


# ---------------------------------------------------------------- corpus


def corpus() -> Corpus | PairCorpus | ListCorpus | None:
    """A labelled corpus (kind "labelled"), a pair corpus ("pairs") or a list corpus ("lists"), whichever the table
    holds."""
    return st.session_state.get(_CORPUS)


def table() -> Table | None:
    """The table the current corpus was built from."""
    return st.session_state.get(_TABLE)


def use_table(table: Table, columns: Columns | PairColumns | ListColumns, drop_duplicates: bool = False,
              drop_leaked: bool = False, list_shape: str = "chain") -> bool:
    """Make the corpus built from `table` current (a pair corpus for PairColumns, a list corpus of `list_shape` for
    ListColumns; neither drops duplicates, both drop their leaked items with `drop_leaked`); True when that changed
    the current corpus.

    Rebuilds only when the input or the mapping changed, under a progress bar: validating a 100k-row table takes
    seconds, which the page shows (a labelled corpus by its stages) rather than sit still. Building raises
    UserError on bad data, in which case the previous corpus stays current.
    """
    key = (table.key, columns, drop_duplicates, drop_leaked, list_shape)
    ss = st.session_state
    if ss.get(_CORPUS_KEY) == key:
        return False
    kind = next(k for k in KINDS.values() if isinstance(columns, k.column_type))
    options = {name: value for name, value in (("drop_duplicates", drop_duplicates), ("list_shape", list_shape))
               if name in kind.options}
    with progress_bar(f"Validating {len(table.df):,} rows…") as bar:
        built = kind.build(table.df, columns, name=table.name, warnings=list(table.warnings), drop_leaked=drop_leaked,
                           progress=bar, **options)
    ss[_CORPUS], ss[_CORPUS_KEY], ss[_TABLE] = built, key, table
    return True


def demo_table() -> Table:
    current = table()
    if current is not None and current.key == "demo":
        return current
    path = demo_corpus_path()
    df, warnings = read_table(path.read_bytes(), path.name)
    return Table("demo", path.stem, "demo", df, tuple(warnings), path.name)


def upload_table(file: Any) -> Table:
    """Parse a st.file_uploader file; the same upload is parsed once, not on every rerun."""
    key = f"upload:{file.file_id}"
    current = table()
    if current is not None and current.key == key:
        return current
    cached = session_cache("parsed_tables")
    if key not in cached:
        cached.clear()  # keep only the latest upload in memory
        df, warnings = read_table(file.getvalue(), file.name)
        remember_upload(df, Path(file.name).name)  # a reload loses the upload: the Corpus page offers it again
        cached[key] = Table("upload", Path(file.name).stem, key, df, tuple(warnings), Path(file.name).name)
    return cached[key]


def recent_table(entry: dict[str, str]) -> Table:
    """A recent corpus (core.data.content.recent_uploads) as a table, under the name the user uploaded it by."""
    current = table()
    key = f"recent:{entry['path']}"
    if current is not None and current.key == key:
        return current
    df, warnings = read_table(Path(entry["path"]).read_bytes(), Path(entry["path"]).name)
    return Table("upload", Path(entry["name"]).stem, key, df, tuple(warnings), entry["name"])


def pasted_table(text: str) -> Table:
    key = "paste:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]  # read_pasted judges it
    current = table()
    if current is not None and current.key == key:
        return current
    df, warnings = read_pasted(text)
    return Table("paste", "pasted table", key, df, tuple(warnings))


def generated() -> dict:
    """The file the Generate page's "Train on this" handed over ({"kind": "lists" | "negatives", "path"}), or {}."""
    return st.session_state.get(_GENERATED) or {}


def set_generated(kind: str, path: Path) -> None:
    st.session_state[_GENERATED] = {"kind": kind, "path": str(path)}


# ---------------------------------------------------------------- model, run, caches


def model_name() -> str:
    return st.session_state.get(_MODEL) or default_model_name()


def set_model_name(name: str) -> None:
    """Switch the reference model; raises UserError (naming what was tried) when it cannot be found."""
    name = name.strip()
    resolve_model(name)
    st.session_state[_MODEL] = name


def run_id() -> str | None:
    return st.session_state.get(_RUN)


def set_run_id(run: str | None) -> None:
    st.session_state[_RUN] = run


def session_cache(space: str) -> dict:
    """A dict that lives for the session, for results a rerun must not recompute (evaluations, counts)."""
    return st.session_state.setdefault(_CACHES, {}).setdefault(space, {})
