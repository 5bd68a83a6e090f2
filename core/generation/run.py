"""A generation from a source file to an output file the recipes train on, with its sidecar: the lists of seed 003
(list_id, rank, text: a list corpus, chain lists) or the negatives of seed 004 (query, positive, negative_1..4).
The CLI and the page call generate(); a cancel writes the items finished so far and then raises Cancelled."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from core.data.provenance import file_sha256, sidecar_path
from core.data.table import clean_texts, names_by_lower, read_file, resolve_column
from core.errors import Cancelled, UserError
from core.generation.engines import Engine
from core.generation.items import ItemCache, Job, Tally, item_key, run_items
from core.generation.lists import MIN_MEMBERS, GeneratedList, ListSettings, check_engine, generate_list
from core.generation.negatives import NEGATIVES, NegativeSettings, NegativesItem, generate_negatives
from core.storage import write_atomic

QUERY_NAMES = ("query", "question", "anchor", "text")
POSITIVE_NAMES = ("positive", "document", "passage", "answer")
MAX_CONCURRENCY = 64
NEGATIVE_COLUMNS = tuple(f"negative_{k}" for k in range(1, NEGATIVES + 1))


@dataclass
class Outcome:
    """What a generation made: the output, its sidecar and counts (kept, dropped and why, from the cache)."""

    out: Path
    sidecar: Path
    counts: dict = field(default_factory=dict)
    seconds: float = 0.0
    cancelled: bool = False


def _column(df: pd.DataFrame, given: str | None, names: tuple[str, ...], role: str, required: bool) -> str | None:
    columns = [str(c) for c in df.columns]
    if given:
        return resolve_column(columns, given, role)
    lower = names_by_lower(columns)
    found = next((lower[n] for n in names if n in lower), None)
    if found is None and required:
        if len(columns) == 1:
            return columns[0]
        raise UserError(f"The source needs a {role} column (named {' or '.join(names)}, or given with its flag); "
                        f"the columns are: {', '.join(columns)}.")
    return found


def _texts(df: pd.DataFrame, column: str) -> list[str]:
    return clean_texts(df[column], column).tolist()


def read_sentences(path: Path, text_col: str | None = None) -> list[str]:
    """A lists source: its texts, non-empty and each once, in file order."""
    df = read_file(path)[0]
    column = _column(df, text_col, ("text", "sentence", "premise"), "text", True)
    texts = list(dict.fromkeys(t for t in _texts(df, column) if t))
    if not texts:
        raise UserError(f"{path} has no non-empty text in column '{column}' to generate lists from.")
    return texts


def read_queries(path: Path, query_col: str | None = None, positive_col: str | None = None
                 ) -> list[tuple[str, str | None]]:
    """A negatives source: (query, positive or None) rows with a query, each once, in file order."""
    df = read_file(path)[0]
    query = _column(df, query_col, QUERY_NAMES, "query", True)
    positive = _column(df, positive_col, POSITIVE_NAMES, "positive", False)
    if positive == query:
        positive = None
    queries = _texts(df, query)
    positives = _texts(df, positive) if positive else [""] * len(queries)
    rows = list(dict.fromkeys((q, p or None) for q, p in zip(queries, positives) if q))
    if not rows:
        raise UserError(f"{path} has no non-empty query in column '{query}' to write negatives for.")
    return rows


def _check_concurrency(engine: Engine, concurrency: int) -> int:
    if not (isinstance(concurrency, int) and 1 <= concurrency <= MAX_CONCURRENCY):
        raise UserError(f"--concurrency must be a whole number from 1 to {MAX_CONCURRENCY}, got {concurrency!r}.")
    return concurrency if engine.kind == "endpoint" else 1  # one local model answers one prompt at a time


def generate(kind: str, engine: Engine, source: Path, out: Path, settings: ListSettings | NegativeSettings,
             seed: int = 0, concurrency: int = 4, limit: int | None = None, columns: dict | None = None,
             progress: Callable[[Tally], None] | None = None, should_stop: Callable[[], bool] = lambda: False,
             on_item: Callable[[int, object], None] | None = None, cache: ItemCache | None = None,
             check_against: dict | None = None) -> Outcome:
    """Make `kind` ("lists" or "negatives") from `source` into `out` (CSV or Parquet by its suffix) with its
    sidecar. `limit`: the first so many source items. `on_item(index, item)` hears of each item as it is ready
    (the page's preview). Every item is cached as it is done; a cancel writes what is finished (the outcome says
    cancelled), and raises Cancelled only when nothing finished passed. `check_against`: a corpus ({"corpus": path,
    column settings}) whose target texts the written texts are checked against (leakage, in the sidecar)."""
    if out.suffix.lower() not in (".csv", ".parquet"):
        raise UserError(f"--out must end in .csv or .parquet, got {out.name!r}.")
    if kind == "lists":
        check_engine(engine, settings)
    columns = columns or {}
    inputs: list = (read_sentences(source, columns.get("text_col")) if kind == "lists"
                    else read_queries(source, columns.get("query_col"), columns.get("positive_col")))
    if limit is not None:
        inputs = inputs[:limit]
    workers = _check_concurrency(engine, concurrency)
    cache = cache or ItemCache()
    key = settings.key()
    if kind == "lists":
        jobs = [Job(item_key(engine.model_id, key, [s, seed]), lambda s=s: generate_list(engine, s, settings, seed))
                for s in inputs]
        decode, tokens = GeneratedList.from_dict, (lambda item: item.tokens)
    else:
        jobs = [Job(item_key(engine.model_id, key, [q, p, seed]),
                    lambda q=q, p=p: generate_negatives(engine, q, p, settings, seed)) for q, p in inputs]
        decode, tokens = NegativesItem.from_dict, (lambda item: item.tokens)
    items: list = [None] * len(jobs)
    t0, cancelled = time.monotonic(), False
    try:
        for index, item in run_items(jobs, cache, lambda item: item.to_dict(), decode, tokens, workers, progress,
                                     should_stop):
            items[index] = item
            if on_item:
                on_item(index, item)
    except Cancelled:
        cancelled = True
    done = [item for item in items if item is not None]
    table, counts = (_lists_table(done) if kind == "lists" else _negatives_table(done))
    counts = {"source_items": len(inputs), "finished": len(done), **counts}
    if not len(table):
        if cancelled:  # the finished items are in the cache: a rerun starts from them
            raise Cancelled()
        raise UserError(f"No {kind} passed the checks ({_reasons(counts)}); nothing was written to {out}.")
    if check_against:  # before anything is written: a corpus that cannot be read is one line
        counts["leakage"] = test_leakage(table, check_against)
    outcome = Outcome(out, sidecar_path(out), counts, time.monotonic() - t0, cancelled)
    _write(table, out)
    record = {"kind": kind, "generator": engine.describe(), "settings": key, "seed": seed, "source": source.name,
              "counts": counts, "cancelled": cancelled, "created": datetime.now(UTC).isoformat(timespec="seconds"),
              "sha256": file_sha256(out)}  # a run trained on the file says when it was edited since
    write_atomic(outcome.sidecar, lambda tmp: tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False),
                                                             encoding="utf-8"))
    return outcome


def test_leakage(table: pd.DataFrame, against: dict) -> dict:
    """How many distinct texts of the generated table repeat a target text of the corpus `against` names (after
    the corpus checks' normalisation: case, accents, spacing), with examples: training on them scores by memory."""
    from core.data.kinds import kind_of, load_any
    from core.generation.quality import leakage

    settings = dict(against)
    corpus = load_any(settings.pop("corpus"), **{k: v for k, v in settings.items() if v is not None})
    texts = list(dict.fromkeys(str(t) for column in table.columns if column not in ("list_id", "rank")
                               for t in table[column]))
    return {"corpus": corpus.name, **leakage(texts, kind_of(corpus).target_texts(corpus))}


def _reasons(counts: dict) -> str:
    dropped = counts.get("dropped", {})
    return ", ".join(f"{n} {why}" for why, n in dropped.items() if n) or "none finished"


def _lists_table(items: list[GeneratedList]) -> tuple[pd.DataFrame, dict]:
    """The kept lists as list rows (rank 1 = the source), with why chains ended early and what was dropped."""
    kept = [item for item in items if item.kept]
    ended: dict[str, int] = {}
    for item in items:
        if item.dropped:
            ended[item.dropped] = ended.get(item.dropped, 0) + 1
    rows = [{"list_id": f"list{number:06d}", "rank": rank, "text": text}
            for number, item in enumerate(kept, 1) for rank, text in enumerate(item.members, 1)]
    return pd.DataFrame(rows, columns=["list_id", "rank", "text"]), {
        "lists": len(kept), "sentences": len(rows), "ended_early": ended,
        "dropped": {f"shorter than {MIN_MEMBERS} members": len(items) - len(kept)}}


def _negatives_table(items: list[NegativesItem]) -> tuple[pd.DataFrame, dict]:
    rows = [{"query": i.query, "positive": i.positive, **dict(zip(NEGATIVE_COLUMNS, i.negatives))}
            for i in items if i.negatives is not None]
    failed = [i for i in items if i.negatives is None]
    return pd.DataFrame(rows, columns=["query", "positive", *NEGATIVE_COLUMNS]), {
        "rows": len(rows), "dropped": {"malformed after every attempt": len(failed)}}


def _write(table: pd.DataFrame, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".parquet":
        write_atomic(out, lambda tmp: table.to_parquet(tmp, index=False))
    else:
        write_atomic(out, lambda tmp: table.to_csv(tmp, index=False))
