"""Which kind of corpus a file holds (labelled texts, pairs or ranked lists), from its column names alone, and
loading it as that kind: a run's corpus may be any of them."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd

from core.data.corpus import Corpus, load_corpus
from core.data.lists import ListCorpus, is_list_table, load_lists
from core.data.pairs import PairCorpus, is_pair_table, load_pairs
from core.data.table import PARQUET_EXTS, read_file, read_table
from core.errors import UserError, shorten

HEADER_BYTES = 64 * 1024
KIND_NAMES = {"labelled": "a labelled corpus (text, label)",
              "pairs": "a pair corpus (text1, text2, score or label)",
              "lists": "a list corpus (list_id, rank, text)"}


def table_kind(df: pd.DataFrame) -> str:
    """"lists", "pairs" or "labelled" from a table's column names."""
    return "lists" if is_list_table(df) else "pairs" if is_pair_table(df) else "labelled"


def corpus_kind(path: str | Path) -> str:
    """"lists", "pairs" or "labelled", from the file's column names alone."""
    return table_kind(pd.DataFrame(columns=_header(Path(path))))


def checked_kind(kind: str | None) -> str | None:
    """A kind the user forces (`--kind`): exactly one of KIND_NAMES, or None to read it from the column names."""
    if kind is not None and kind not in KIND_NAMES:
        raise UserError(f"The corpus kind must be one of {', '.join(KIND_NAMES)}; got {shorten(kind)}.")
    return kind


PAIR_ROLES = ("text1_col", "text2_col", "score_col")  # the column settings only a pair corpus has
LIST_ROLES = ("list_col", "rank_col")  # and only a list corpus


def load_any(path: str | Path, text_col: str | None = None, label_col: str | None = None,
             split_col: str | None = None, drop_leaked: bool = False,
             list_shape: str = "chain", kind: str | None = None, drop_duplicates: bool = False,
             **roles: str | None) -> Corpus | PairCorpus | ListCorpus:
    """The corpus the file holds, of whichever kind; `drop_leaked` drops the target items that are also training
    items (texts; pairs in either order; lists with the same anchor and members: core.data.leakage); `list_shape`
    is what a list file's order states (ListCorpus.shape); `kind` (one of KIND_NAMES) reads the file as that kind
    instead of the one its column names suggest. `roles` name a pair corpus's columns (PAIR_ROLES) or a list
    corpus's (LIST_ROLES), which also says its kind: a file whose own names the loader does not know (SICK's
    sentence_A) reads as the pages mapped it. `drop_duplicates` is a labelled corpus's (build_corpus)."""
    unknown = set(roles) - {*PAIR_ROLES, *LIST_ROLES}
    if unknown:
        raise TypeError(f"load_any() got unexpected keyword arguments {sorted(unknown)}")
    given = {name: value for name, value in roles.items() if value}
    implied = {"pairs" for name in given if name in PAIR_ROLES} | {"lists" for name in given if name in LIST_ROLES}
    if len(implied) > 1:
        raise UserError(f"{' and '.join(sorted(given))} name the columns of a pair corpus and of a list corpus; a "
                        "corpus is one kind: give the columns of one.")
    kind = checked_kind(kind) or next(iter(implied), None) or corpus_kind(path)
    if implied - {kind}:
        raise UserError(f"{', '.join(sorted(given))} name columns of another kind of corpus than {KIND_NAMES[kind]}; "
                        "leave them unset or read the file as that kind.")
    if drop_duplicates and kind != "labelled":
        raise UserError("drop_duplicates drops repeated texts of a labelled corpus; a pair or list corpus keeps its "
                        "rows (drop_leaked drops target items that repeat training ones).")
    if kind == "pairs":
        if text_col:
            raise UserError("text_col names the text column of a labelled corpus; a pair corpus reads its text1 and "
                            "text2 columns (text1_col, text2_col).")
        return load_pairs(path, text1_col=given.get("text1_col"), text2_col=given.get("text2_col"),
                          score_col=given.get("score_col"), label_col=label_col, split_col=split_col,
                          drop_leaked=drop_leaked)
    if kind == "lists":
        if label_col:
            raise UserError("label_col names a label column; a list corpus is ordered by its rank column.")
        return load_lists(path, list_col=given.get("list_col"), rank_col=given.get("rank_col"), text_col=text_col,
                          split_col=split_col, shape=list_shape, drop_leaked=drop_leaked)
    return load_corpus(path, text_col=text_col, label_col=label_col, split_col=split_col,
                       drop_duplicates=drop_duplicates, drop_leaked=drop_leaked)


_SETTING_OF_ROLE = {"text": "text_col", "label": "label_col", "split": "split_col", "text1": "text1_col",
                    "text2": "text2_col", "score": "score_col", "list_id": "list_col", "rank": "rank_col"}


def column_settings(corpus: Corpus | PairCorpus | ListCorpus) -> dict[str, str | None]:
    """The run settings that name the columns a corpus was read from (text_col, text1_col, ...), as detected or
    mapped: a run stores them, so its config reads the same columns from the original file on any machine."""
    return {_SETTING_OF_ROLE[role]: column for role, column in asdict(corpus.columns).items()}


def _header(path: Path) -> list[str]:
    """The column names from the Parquet schema or the first complete lines; a file those cannot be read from
    (a JSON array, an odd encoding cut mid-character) is read whole, which also gives its precise error."""
    if path.is_file():
        try:
            if path.suffix.lower() in PARQUET_EXTS:
                import pyarrow.parquet as pq  # only Parquet files need pyarrow

                return list(pq.read_schema(path).names)
            with path.open("rb") as f:
                head = f.read(HEADER_BYTES + 1)
            if len(head) > HEADER_BYTES:
                head = head[: head.rfind(b"\n", 0, HEADER_BYTES) + 1]
            return [str(c) for c in read_table(head, path.name)[0].columns]
        except (UserError, OSError, ValueError):
            pass
    return [str(c) for c in read_file(path)[0].columns]
