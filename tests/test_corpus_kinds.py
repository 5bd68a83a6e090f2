"""A corpus kind is one class plus one registration (core.data.kinds): this module adds a fourth, a file of
`query, positive` rows scored by kNN on its queries (a query is right when its own positive is its nearest one), and
`python -m core evaluate` and the Corpus page read, check and score it with no other change. The registry's own
contract is checked on the three kinds the project has."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from core.cli import main
from core.data.kinds import KINDS, column_settings, corpus_kind, kind_of, load_any, register, table_kind
from core.data.table import clean_splits, clean_texts, read_file, resolve_column, seeded_holdout
from core.errors import UserError
from core.storage import key_hash
from tests.conftest import button, no_errors, paste_table

WORDS = ("apple", "river", "guitar", "planet", "winter", "coffee", "engine", "garden", "violin", "desert")


@dataclass(frozen=True)
class QueryColumns:
    query: str
    positive: str
    split: str | None


@dataclass
class QueryReport:
    rows_read: int
    rows_kept: int
    split_source: str
    warnings: list[str] = field(default_factory=list)
    leaked: int = 0
    leaked_dropped: int = 0
    leaked_examples: list[str] = field(default_factory=list)


@dataclass(eq=False)
class QueryCorpus:
    kind: ClassVar[str] = "queries"
    name: str
    columns: QueryColumns
    train: list[tuple[str, str]]
    test: list[tuple[str, str]]
    target_split: str
    report: QueryReport

    @property
    def fingerprint(self) -> str:
        return key_hash(["queries", self.train, self.test, self.target_split])[:16]

    def leakage(self) -> str:
        return f"{self.report.leaked} {self.target_split} queries are also training queries"

    def sharing(self) -> str:
        return ""

    def summary(self) -> dict:
        return {"kind": self.kind, "name": self.name, "rows_train": len(self.train), "rows_test": len(self.test),
                "target_split": self.target_split, "fingerprint": self.fingerprint}


class QueryKind:
    """Queries with their positive passage, scored by whether each target query's nearest target positive is its
    own (kNN with k = 1 over the positives, cosine)."""

    name, title, item, unit = "queries", "a query corpus (query, positive)", "query", "queries"
    roles = {"query": "query_col", "positive": "positive_col", "split": "split_col"}
    required = ("query", "positive")
    options = ()
    judged = False
    mined = False
    column_type = QueryColumns
    figure_sets = {"queries": ("A query corpus", ("knn_accuracy",))}

    def recognises(self, names: list[str]) -> bool:
        return {"query", "positive"} <= {n.lower() for n in names}

    def detect(self, df: pd.DataFrame) -> QueryColumns:
        names = [str(c) for c in df.columns]
        split = next((n for n in names if n.lower() == "split"), None)
        return QueryColumns(resolve_column(names, "query", "query"), resolve_column(names, "positive", "positive"),
                            split)

    def build(self, df, columns: QueryColumns, name: str, warnings: list[str], drop_leaked: bool = False,
              progress=None) -> QueryCorpus:
        queries = clean_texts(df[columns.query], columns.query).tolist()
        positives = clean_texts(df[columns.positive], columns.positive).tolist()
        rows = [(q, p) for q, p in zip(queries, positives) if q and p]
        if len(rows) < 10:
            raise UserError(f"{name} has {len(rows)} complete query rows; give at least 10.")
        if columns.split:
            splits = clean_splits(df[columns.split]).to_numpy()
            train, test, source = np.flatnonzero(splits == "train"), np.flatnonzero(splits == "test"), "split column"
        else:
            (train, test), source = seeded_holdout(np.arange(len(rows))), "random 90:10, seed 0"
        report = QueryReport(rows_read=len(df), rows_kept=len(rows), split_source=source, warnings=list(warnings))
        return QueryCorpus(name, columns, [rows[i] for i in train], [rows[i] for i in test], "test", report)

    def load(self, path: Path, settings: dict, drop_leaked: bool = False) -> QueryCorpus:
        df, warnings = read_file(path)
        return self.build(df, self.detect(df), path.stem, warnings, drop_leaked)

    def targets(self, corpus: QueryCorpus) -> int:
        return len(corpus.test)

    def texts(self, corpus: QueryCorpus) -> list[str]:
        return [text for part in (corpus.train, corpus.test) for row in part for text in row]

    def target_texts(self, corpus: QueryCorpus) -> list[str]:
        return [text for row in corpus.test for text in row]

    def evaluate(self, corpus: QueryCorpus, scorer) -> dict:
        queries, positives = self.evaluation_texts(corpus, scorer)
        q = scorer.encode(queries, "encoding the queries")
        p = scorer.encode(positives, "encoding the positives")
        return {"kind": self.name, "model": "", "target_split": corpus.target_split,
                "knn_accuracy": float(np.mean(nearest_positive(q, p) == np.arange(len(q)))),
                "n_queries": len(queries)}

    def evaluation_texts(self, corpus: QueryCorpus, scorer) -> list[list[str]]:
        return [[q for q, _ in corpus.test], [p for _, p in corpus.test]]

    def figures_key(self, corpus: QueryCorpus) -> str:
        return self.name

    def cards(self, corpus: QueryCorpus) -> list[tuple[str, object, str]]:
        return [("Queries", f"{len(corpus.train) + len(corpus.test):,}",
                 f"{len(corpus.train):,} train, {len(corpus.test):,} {corpus.target_split}"),
                ("Kind", self.name, self.caption(corpus, str))]

    def caption(self, corpus: QueryCorpus, code) -> str:
        return f"{corpus.report.rows_kept:,} query rows"

    def summary_text(self, summary: dict, code) -> str:
        return f"{summary['rows_train']} train queries, {summary['rows_test']} test queries"


def nearest_positive(queries: np.ndarray, positives: np.ndarray) -> np.ndarray:
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    return np.argmax(unit(queries) @ unit(positives).T, axis=1)


def query_table(n: int = 40) -> str:
    lines = ["query,positive,split"]
    for i in range(n):
        word = WORDS[i % len(WORDS)]
        lines.append(f"what about the {word} {i},a passage on the {word} numbered {i},{'train' if i < 30 else 'test'}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def queries_kind():
    """The fourth kind, registered for one test: the one line a new kind adds (core.data.kinds)."""
    register(QueryKind())
    yield KINDS["queries"]
    del KINDS["queries"]


def test_a_registered_kind_is_recognised_loaded_and_named(queries_kind, tmp_path):
    path = tmp_path / "queries.csv"
    path.write_text(query_table())
    assert corpus_kind(path) == "queries" and table_kind(pd.DataFrame(columns=["Query", "Positive"])) == "queries"
    corpus = load_any(path)
    assert isinstance(corpus, QueryCorpus) and kind_of(corpus) is queries_kind
    assert (len(corpus.train), len(corpus.test)) == (30, 10)
    assert column_settings(corpus) == {"query_col": "query", "positive_col": "positive", "split_col": "split"}
    with pytest.raises(UserError, match="drop_duplicates drops repeated texts of a labelled corpus"):
        load_any(path, drop_duplicates=True)
    assert corpus_kind(path) == "queries"  # the others are still asked after it
    assert table_kind(pd.DataFrame(columns=["text1", "text2"])) == "pairs"


def test_evaluate_scores_a_registered_kind_by_its_own_figure(queries_kind, tmp_path, tiny_model_dir, tiny_model,
                                                             capsys):
    path = tmp_path / "queries.csv"
    path.write_text(query_table())
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    test = load_any(path).test
    q = tiny_model.encode([a for a, _ in test])
    p = tiny_model.encode([b for _, b in test])
    expected = float(np.mean(nearest_positive(q, p) == np.arange(len(test))))
    assert result["kind"] == "queries" and result["n_queries"] == 10
    assert result["knn_accuracy"] == pytest.approx(expected, abs=1e-9)
    low, high = result["knn_accuracy_ci"]  # the interval every figure gets, from the kind's n_queries
    assert low <= result["knn_accuracy"] <= high
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("queries corpus; model") and f"kNN accuracy {100 * expected:.1f}%" in out
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--k", "5"]) == 2  # P@k is not its figure
    assert "--k sets how P@k / S@k and kNN of a labelled corpus are computed" in capsys.readouterr().err


def test_the_corpus_page_reads_checks_and_scores_a_registered_kind(queries_kind, app):
    at = paste_table(app, query_table())
    no_errors(at)
    assert {s.label: s.value for s in at.selectbox}.items() >= {
        "Query column": "query", "Positive column": "positive", "Split column": "split"}.items()
    cards = {m.label: m.value for m in at.metric}
    assert cards["Rows read"] == "40" and cards["Queries"] == "40" and cards["Kind"] == "queries"
    assert "40 query rows · split: split column" in [c.value for c in at.caption]
    button(at, "Run reference evaluation").click().run()
    no_errors(at)
    shown = {m.label: m.value for m in at.metric}["kNN accuracy"]
    assert 0 <= float(shown.rstrip("%")) <= 100
    assert "Run reference evaluation" not in [b.label for b in at.button]


@pytest.mark.parametrize("name", ["labelled", "pairs", "lists"])
def test_every_kind_names_its_roles_figures_and_options_consistently(name):
    """What the rest of the code asks a kind is there for each of the project's own: roles that are fields of its
    columns, required roles among them, figure sets holding its own name, options a loader accepts."""
    kind = KINDS[name]
    assert kind.name == name and kind.title.startswith("a ")
    assert set(kind.roles) == {f for f in kind.column_type.__dataclass_fields__}
    assert set(kind.required) <= set(kind.roles) and name in kind.figure_sets
    assert set(kind.options) <= {"drop_duplicates", "list_shape"}


def test_every_kind_counts_its_items_per_split_on_its_first_card(tmp_path):
    """The Home and Corpus pages show a kind's first card as its items in all, then train and target counts."""
    tables = {"labelled": pd.DataFrame({"text": [f"text {i}" for i in range(120)], "label": ["a", "b"] * 60}),
              "pairs": pd.DataFrame({"text1": [f"a cat {i}" for i in range(120)],
                                     "text2": [f"a dog {i}" for i in range(120)],
                                     "score": [i % 5 for i in range(120)]}),
              "lists": pd.DataFrame({"list_id": np.repeat([f"q{i}" for i in range(120)], 3),
                                     "rank": np.tile([1, 2, 3], 120), "text": [f"text {i}" for i in range(360)]})}
    for name, table in tables.items():
        path = tmp_path / f"{name}.csv"
        table.to_csv(path, index=False)
        corpus = load_any(path)
        kind = kind_of(corpus)
        unit, total, split = kind.cards(corpus)[0]
        n_target = kind.targets(corpus)
        assert kind.name == name and int(total) == int(split.split()[0]) + n_target
        assert split.endswith(f" train, {n_target} {corpus.target_split}") and n_target > 0, (name, unit, split)
