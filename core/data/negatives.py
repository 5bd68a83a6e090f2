"""Negatives corpus: rows of (query, positive, negative_1..negative_4), the four negatives in decreasing similarity
to the query, hardest first, as seed 004's language model writes them (`python -m core generate negatives`). The
`mgh` recipe trains on such a file's rows with `--negatives FILE` (band k's negative is negative_k); loaded on its
own, a model is scored on its target rows by reranking: the share of queries whose positive it ranks above all four
negatives (cosine).

Its validation report counts what makes a row unusable (an empty text: the row is dropped) or suspect (two equal
negatives, a negative equal to its positive, a target query that is also a training query: kept and counted)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from core.data.table import (
    LEAK_EXAMPLES,
    MIN_ROWS,
    VALIDATION_NAMES,
    check_unique_names,
    clean_splits,
    clean_texts,
    count_card,
    few_targets_warning,
    leak_text,
    names_by_lower,
    read_file,
    resolve_column,
    seeded_holdout,
)
from core.errors import UserError
from core.storage import key_hash

NEGATIVES = 4
NEGATIVE_NAMES = tuple((f"negative_{k}", f"n{k}", f"hard_negative_{k}") for k in range(1, NEGATIVES + 1))
QUERY_NAMES = ("query", "anchor")
POSITIVE_NAMES = ("positive", "document")


@dataclass(frozen=True)
class NegativeColumns:
    query: str
    positive: str
    split: str | None


@dataclass(frozen=True)
class NegativesRow:
    query: str
    positive: str
    negatives: tuple[str, ...]  # hardest first


@dataclass
class NegativesReport:
    rows_read: int
    rows_kept: int
    split_source: str
    warnings: list[str] = field(default_factory=list)
    empty: int = 0  # rows dropped: an empty query, positive or negative
    repeated: int = 0  # rows with two equal negatives (after leak_text)
    equal_positive: int = 0  # rows with a negative equal to the positive
    leaked: int = 0  # target queries that are also training queries
    leaked_dropped: int = 0
    leaked_examples: list[str] = field(default_factory=list)


@dataclass(eq=False)
class NegativesCorpus:
    kind: ClassVar[str] = "negatives"
    name: str
    columns: NegativeColumns
    negative_columns: tuple[str, ...]
    train: list[NegativesRow]
    test: list[NegativesRow]
    target_split: str
    report: NegativesReport

    @property
    def fingerprint(self) -> str:
        return key_hash(["negatives", [(r.query, r.positive, r.negatives) for r in (*self.train, *self.test)],
                         len(self.train), self.target_split])[:16]

    @property
    def rows(self) -> list[NegativesRow]:
        """Every row, training rows first: what the mgh recipe trains on (the file is training data)."""
        return [*self.train, *self.test]

    def leakage(self) -> str:
        n = self.report.leaked
        return f"{n} {self.target_split} queries are also training queries" if n else ""

    def sharing(self) -> str:
        return ""

    def summary(self) -> dict:
        return {"kind": self.kind, "name": self.name, "rows_train": len(self.train), "rows_test": len(self.test),
                "target_split": self.target_split, "fingerprint": self.fingerprint}


def _pick(names: list[str], given: str | None, options: tuple[str, ...], role: str) -> str | None:
    if given:
        return resolve_column(names, given, role)
    lower = names_by_lower(names)
    return next((lower[n] for n in options if n in lower), None)


def negative_columns(names: list[str]) -> tuple[str, ...] | None:
    """The four negatives' columns, hardest first, by their names; None unless all four are there."""
    lower = names_by_lower(names)
    found = [next((lower[n] for n in options if n in lower), None) for options in NEGATIVE_NAMES]
    return tuple(found) if all(found) else None  # type: ignore[arg-type]


class NegativesKind:
    """Seed 004's (query, positive, four graded negatives) rows; see the module docstring."""

    name, title, item, unit = "negatives", "a negatives file (query, positive, negative_1..4)", "query", "queries"
    roles = {"query": "query_col", "positive": "positive_col", "split": "split_col"}
    required = ("query", "positive")
    options = ()
    judged = False
    mined = False
    column_type = NegativeColumns
    figure_sets = {"negatives": ("A negatives file", ("rerank_accuracy",))}

    def recognises(self, names: list[str]) -> bool:
        return negative_columns(names) is not None and _pick(names, None, QUERY_NAMES, "query") is not None

    def detect(self, df: pd.DataFrame, settings: dict | None = None) -> NegativeColumns:
        names = [str(c) for c in df.columns]
        settings = settings or {}
        query = _pick(names, settings.get("query_col"), QUERY_NAMES, "query")
        positive = _pick(names, settings.get("positive_col"), POSITIVE_NAMES, "positive")
        if query is None or positive is None or negative_columns(names) is None:
            raise UserError(f"A negatives file needs query, positive and negative_1..negative_4 columns; the columns "
                            f"are: {', '.join(names)}.")
        return NegativeColumns(query, positive, _pick(names, settings.get("split_col"), ("split",), "split"))

    def build(self, df: pd.DataFrame, columns: NegativeColumns, name: str, warnings: list[str],
              drop_leaked: bool = False, progress: Callable[[str, int, int], None] | None = None) -> NegativesCorpus:
        names = [str(c) for c in df.columns]
        check_unique_names(names, name)
        negs = negative_columns(names)
        texts = {c: clean_texts(df[c], c).tolist() for c in (columns.query, columns.positive, *negs)}
        n = len(df)
        complete = [all(texts[c][i] for c in texts) for i in range(n)]
        kept = [i for i in range(n) if complete[i]]
        if len(kept) < MIN_ROWS:
            raise UserError(f"{name} has {len(kept)} complete rows (a query, a positive and four negatives); give at "
                            f"least {MIN_ROWS}.")
        rows = [NegativesRow(texts[columns.query][i], texts[columns.positive][i],
                             tuple(texts[c][i] for c in negs)) for i in kept]
        report = NegativesReport(rows_read=n, rows_kept=len(rows), split_source="", warnings=list(warnings),
                                 empty=n - len(kept))
        for row in rows:
            seen = [leak_text(t) for t in row.negatives]
            report.repeated += len(set(seen)) < len(seen)
            report.equal_positive += leak_text(row.positive) in seen
        train_idx, test_idx, target, report.split_source = _split(df, columns, kept)
        train, test = [rows[i] for i in train_idx], [rows[i] for i in test_idx]
        training_queries = {leak_text(r.query) for r in train}
        leaked = [r.query for r in test if leak_text(r.query) in training_queries]
        report.leaked, report.leaked_examples = len(leaked), leaked[:LEAK_EXAMPLES]
        if drop_leaked and leaked:
            test = [r for r in test if leak_text(r.query) not in training_queries]
            report.leaked_dropped = len(leaked)
        report.warnings.extend(_warnings(report, len(test)))
        return NegativesCorpus(name, columns, negs, train, test, target, report)

    def load(self, path: Path, settings: dict[str, str | None], drop_leaked: bool = False) -> NegativesCorpus:
        df, warnings = read_file(Path(path))
        return self.build(df, self.detect(df, settings), Path(path).name, warnings, drop_leaked)

    def targets(self, corpus: NegativesCorpus) -> int:
        return len(corpus.test)

    def texts(self, corpus: NegativesCorpus) -> list[str]:
        return [t for r in corpus.rows for t in (r.query, r.positive, *r.negatives)]

    def target_texts(self, corpus: NegativesCorpus) -> list[str]:
        return [t for r in corpus.test for t in (r.query, r.positive, *r.negatives)]

    def evaluation_texts(self, corpus: NegativesCorpus, scorer) -> list[list[str]]:
        return [[r.query for r in corpus.test], [r.positive for r in corpus.test],
                [t for r in corpus.test for t in r.negatives]]

    def evaluate(self, corpus: NegativesCorpus, scorer) -> dict:
        """The share of target queries whose positive has a higher cosine than each of its four negatives."""
        return {"kind": self.name, "model": "", "target_split": corpus.target_split,
                **scorer.rerank([(r.query, r.positive, r.negatives) for r in corpus.test])}

    def figures_key(self, corpus: NegativesCorpus) -> str:
        return self.name

    def cards(self, corpus: NegativesCorpus) -> list[tuple[str, object, str]]:
        r = corpus.report
        return [count_card("Rows", len(corpus.train), len(corpus.test), corpus.target_split),
                ("Suspect rows", f"{r.repeated + r.equal_positive:,}",
                 f"{r.repeated:,} with two equal negatives, {r.equal_positive:,} with a negative equal to its "
                 f"positive; {r.empty:,} dropped for an empty text")]

    def caption(self, corpus: NegativesCorpus, code: Callable[[str], str]) -> str:
        return f"{corpus.report.rows_kept:,} rows of {code(corpus.columns.query)} with four negatives"

    def summary_text(self, summary: dict, code: Callable[[str], str]) -> str:
        return f"{summary['rows_train']:,} training and {summary['rows_test']:,} {summary['target_split']} rows"


def _split(df: pd.DataFrame, columns: NegativeColumns, kept: list[int]) -> tuple[np.ndarray, np.ndarray, str, str]:
    """(train rows, target rows, target split, where the split came from), as positions in the kept rows: a split
    column's train and test (else validation) rows, or a seeded 90:10 hold-out."""
    if columns.split:
        splits = clean_splits(df[columns.split]).to_numpy()[kept]
        target = "test" if (splits == "test").any() else "validation"
        wanted = ("test",) if target == "test" else VALIDATION_NAMES
        train, test = np.flatnonzero(splits == "train"), np.flatnonzero(np.isin(splits, wanted))
        if len(train) and len(test):
            return train, test, target, f"split column '{columns.split}'"
    train, test = seeded_holdout(np.arange(len(kept)))
    return train, test, "holdout", "random 90:10, seed 0"


def _warnings(report: NegativesReport, targets: int) -> list[str]:
    out = []
    if report.empty:
        out.append(f"{report.empty:,} rows have an empty query, positive or negative; dropped.")
    if report.repeated:
        out.append(f"{report.repeated:,} rows have two equal negatives (after case, accents and spacing); kept.")
    if report.equal_positive:
        out.append(f"{report.equal_positive:,} rows have a negative equal to their positive, which trains the model "
                   "to push a text away from itself; kept.")
    if report.leaked:
        out.append(f"{report.leaked:,} target queries are also training queries (e.g. "
                   f"{', '.join(map(repr, report.leaked_examples[:3]))}); --drop-leaked drops them.")
    if (few := few_targets_warning(targets, "target queries")) is not None:
        out.append(few)
    return out


NEGATIVE_ROWS = NegativesKind()


def load_negatives(path: str | Path, drop_leaked: bool = False) -> NegativesCorpus:
    """A negatives file, as the mgh recipe's --negatives reads it."""
    return NEGATIVE_ROWS.load(Path(path), {}, drop_leaked)
