"""Corpus kinds: what a corpus file holds (labelled texts, pairs, ranked lists, or a kind registered later), told from
its column names alone, and loading it as that kind. Every kind is one `CorpusKind` in its own module
(core.data.corpus, pairs, lists, negatives) plus one `register` line below; the rest of the code asks the corpus's kind
(`kind_of`) instead of branching on it.

core.data sits below core.evaluation, so a kind cannot import the evaluations it is judged by: the evaluation hands
it a scorer (core.evaluation.corpus_eval.Scorer) whose methods are the evaluations the kinds here use (P@k / S@k,
STS Spearman, ordering), and a kind calls the one it is judged by, or computes its own from `scorer.encode`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from core.data.corpus import LABELLED
from core.data.lists import LISTS
from core.data.negatives import NEGATIVE_ROWS
from core.data.pairs import PAIRS
from core.data.table import PARQUET_EXTS, read_file, read_table
from core.errors import UserError, shorten

HEADER_BYTES = 64 * 1024


class CorpusKind(Protocol):
    """One kind of corpus. A corpus object of this kind has `kind == name`, `name`, `fingerprint`, `target_split`,
    `columns` (a `column_type`, one field per role), `report` (rows_read, warnings, split_source, leaked,
    leaked_dropped, leaked_examples), `summary()` (a dict, with "kind" unless it is the labelled one), `leakage()`
    and `sharing()` (its leaked and shared items in words, "" for none). A kind no recipe trains on (`Recipe.kinds`)
    need not define the training members at the end."""

    name: str  # the corpus's `kind`, as run configs and results record it
    title: str  # "a labelled corpus (text, label)", in messages
    item: str  # what one target item is, "pair": a model card counts leaked ones in it
    unit: str  # the group its per-item arrays are matched by ("texts", "pairs", "lists": core.evaluation.items)
    roles: dict[str, str]  # column role -> the run setting that names its column, in the pickers' order
    required: tuple[str, ...]  # the roles that must have a column
    options: tuple[str, ...]  # load settings it takes besides its columns and drop_leaked ("drop_duplicates")
    column_type: type  # the dataclass of its columns, one field per role
    judged: bool  # whether its figures depend on the reference model (S@k's judge) and the evaluation settings
    figure_sets: dict[str, tuple[str, tuple[str, ...]]]  # key -> (who reports them, the headline metrics' keys)

    def recognises(self, names: list[str]) -> bool:
        """Whether a table with these column names holds this kind (kinds are asked last registered first)."""

    def detect(self, df: pd.DataFrame) -> Any:
        """Its columns in `df`, found by their names (a UserError names what is missing)."""

    def build(self, df: pd.DataFrame, columns: Any, name: str, warnings: list[str], drop_leaked: bool = False,
              progress: Callable[[str, int, int], None] | None = None, **options: Any) -> Any:
        """The corpus from a table and its columns, with its validation report."""

    def load(self, path: Path, settings: dict[str, str | None], drop_leaked: bool = False, **options: Any) -> Any:
        """The corpus in `path`, its columns named by run settings (`roles`' values) or detected."""

    def targets(self, corpus: Any) -> int:
        """How many target items score a model."""

    def texts(self, corpus: Any) -> list[str]:
        """Every text the corpus holds, train and target, as the model reads them (for token counts)."""

    def target_texts(self, corpus: Any) -> list[str]:
        """Every text of its target items: what generated training data must not repeat (leakage)."""

    def evaluate(self, corpus: Any, scorer: Any) -> dict:
        """What a model scores on the corpus: a result with `kind`, `target_split` and its figures, each headline
        figure with the count its interval is over (n_queries, n_pairs, n_lists)."""

    def evaluation_texts(self, corpus: Any, scorer: Any) -> list[list[str]]:
        """The text lists `evaluate` encodes (each one cache entry)."""

    def figures_key(self, corpus: Any) -> str:
        """The key of `figure_sets` this corpus reports."""

    def cards(self, corpus: Any) -> list[tuple[str, object, str]]:
        """Two (label, value, help) cards that sum the corpus up (the Home page, a report)."""

    def caption(self, corpus: Any, code: Callable[[str], str]) -> str:
        """The corpus in one line (the sidebar), names formatted by `code`."""

    def summary_text(self, summary: dict, code: Callable[[str], str]) -> str:
        """A stored `summary()` in a few words (model cards), names formatted by `code`."""

    # Training
    mined: bool  # whether a recipe's examples are mined from its labels with the reference model (core.data.mining)

    def train_pairs(self, corpus: Any) -> Any:
        """Its own training pairs (a PairSplit) where it has them, else None (they are mined)."""

    def as_lists(self, corpus: Any, scorer: Any, size: int, max_lists: int, seed: int,
                 progress: Callable[[int, int], None] | None = None) -> Any:
        """The corpus as ranked lists (a ListCorpus) for a list recipe."""

    def export_texts(self, corpus: Any, scorer: Any) -> tuple[list[list[str]], dict[str, list]]:
        """The text lists whose embeddings an export writes (each one of the evaluation's cache entries) and the
        columns beside them (split, label)."""


KINDS: dict[str, CorpusKind] = {}


def register(kind: CorpusKind) -> None:
    """Add a kind. Kinds are asked whether they recognise a table last registered first, so a kind with distinctive
    columns goes after the labelled corpus, which takes any table (its columns are found or picked later)."""
    KINDS[kind.name] = kind


register(LABELLED)
register(PAIRS)
register(LISTS)
register(NEGATIVE_ROWS)


def kind_of(corpus_or_name: Any) -> CorpusKind:
    """The registered kind of a corpus (its `kind`), a corpus summary (its "kind", labelled where a summary stored
    before kinds lacks one) or a kind name."""
    name = (corpus_or_name if isinstance(corpus_or_name, str)
            else corpus_or_name.get("kind", LABELLED.name) if isinstance(corpus_or_name, dict)
            else corpus_or_name.kind)
    return KINDS[name]


def table_kind(df: pd.DataFrame) -> str:
    """The name of the kind that recognises the table's column names, the last registered asked first."""
    names = [str(c) for c in df.columns]
    return next(name for name, kind in reversed(KINDS.items()) if kind.recognises(names))


def corpus_kind(path: str | Path) -> str:
    """The kind a file holds, from its column names alone."""
    return table_kind(pd.DataFrame(columns=_header(Path(path))))


def checked_kind(kind: str | None) -> str | None:
    """A kind the user forces (`--kind`): exactly one of KINDS, or None to read it from the column names."""
    if kind is not None and kind not in KINDS:
        raise UserError(f"The corpus kind must be one of {', '.join(KINDS)}; got {shorten(kind)}.")
    return kind


def own_settings(kind: CorpusKind) -> set[str]:
    """The column settings only this kind has (text1_col for pairs): naming one says the file is of this kind."""
    return set(kind.roles.values()).difference(*(set(k.roles.values()) for k in KINDS.values() if k is not kind))


def implied_kind(settings: dict[str, str | None]) -> str | None:
    """The kind that column settings given name (text1_col: a pair corpus), None where they name no kind's own
    column; a one-line UserError where they name two kinds'."""
    given = sorted(name for name, value in settings.items() if value)
    implied = {k.name for k in KINDS.values() for name in given if name in own_settings(k)}
    if len(implied) > 1:
        raise UserError(f"{' and '.join(given)} name the columns of a pair corpus and of a list corpus; a corpus is "
                        "one kind: give the columns of one.")
    return next(iter(implied), None)


def load_any(path: str | Path, text_col: str | None = None, label_col: str | None = None,
             split_col: str | None = None, drop_leaked: bool = False,
             list_shape: str = "chain", kind: str | None = None, drop_duplicates: bool = False,
             **roles: str | None) -> Any:
    """The corpus the file holds, of whichever kind; `drop_leaked` drops the target items that are also training
    items (texts; pairs in either order; lists with the same anchor and members: core.data.leakage); `list_shape`
    is what a list file's order states (ListCorpus.shape); `kind` (one of KINDS) reads the file as that kind
    instead of the one its column names suggest. `roles` name columns by the settings of a kind's roles
    (text1_col, list_col, ...), which also says its kind: a file whose own names the loader does not know (SICK's
    sentence_A) reads as the pages mapped it. `drop_duplicates` is a labelled corpus's (build_corpus)."""
    known = {setting for k in KINDS.values() for setting in k.roles.values()}
    unknown = set(roles) - known
    if unknown:
        raise TypeError(f"load_any() got unexpected keyword arguments {sorted(unknown)}")
    given = {name: value for name, value in roles.items() if value}
    implied = implied_kind(given)
    kind = checked_kind(kind) or implied or corpus_kind(path)
    spec = KINDS[kind]
    if implied not in (None, kind):
        raise UserError(f"{', '.join(sorted(given))} name columns of another kind of corpus than {spec.title}; "
                        "leave them unset or read the file as that kind.")
    if drop_duplicates and "drop_duplicates" not in spec.options:
        raise UserError("drop_duplicates drops repeated texts of a labelled corpus; a pair or list corpus keeps its "
                        "rows (drop_leaked drops target items that repeat training ones).")
    settings = {**given, "text_col": text_col, "label_col": label_col, "split_col": split_col}
    options = {name: value for name, value in (("list_shape", list_shape), ("drop_duplicates", drop_duplicates))
               if name in spec.options}
    return spec.load(Path(path), settings, drop_leaked=drop_leaked, **options)


def column_settings(corpus: Any) -> dict[str, str | None]:
    """The run settings that name the columns a corpus was read from (text_col, text1_col, ...), as detected or
    mapped: a run stores them, so its config reads the same columns from the original file on any machine."""
    return {kind_of(corpus).roles[role]: column for role, column in asdict(corpus.columns).items()}


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
