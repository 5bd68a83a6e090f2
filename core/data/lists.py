"""List corpus: ranked lists of texts, an anchor followed by members from most to least related (docs/definitions.md,
ListMLE post-training).

A list's ORDER must come from a source independent of the teacher whose similarities ListMLE nudges, so lists come
from one of three places:
- a list file: one row per member with list_id, rank (1 = the anchor) and text (and an optional split per list);
- NLI pairs: a premise, then one entailment, one neutral and one contradiction hypothesis of it, then a random
  hypothesis of another premise;
- a labelled corpus: an anchor, its nearest same-label texts, then its nearest other-label texts (nearest by a
  frozen reference model; the label decides which group comes first).
A list's shape says which of its rows have a known order: a list file is a chain list (every member an anchor over
the members after it) unless it says it is a star list; NLI and neighbour lists are star lists (member 0 the anchor).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from core.data.leakage import (
    LIST_TERMS,
    LeakTerms,
    LeakWords,
    drop_leaked_rows,
    find_leaks,
)
from core.data.table import (
    DEFAULT_MAX_BYTES,
    LEAK_EXAMPLES,
    MIN_ROWS,
    SPLIT_NAMES,
    SPLIT_SEED,
    check_unique_names,
    clean_splits,
    clean_texts,
    count_card,
    few_targets_warning,
    is_missing,
    long_texts,
    names_by_lower,
    read_file,
    resolve_column,
    rows_key,
    seeded_holdout,
    split_by_column,
    split_ratio,
    train_on_validation,
)
from core.errors import UserError, shorten

LIST_ID_NAMES = ("list_id", "query_id", "qid")
RANK_NAMES = ("rank",)
LIST_TEXT_NAMES = ("text", "sentence", "passage", "document")
MIN_MEMBERS = 3  # an anchor and two members to order
MAX_MEMBERS = 64  # every member of every list in a batch is encoded in each step
MIN_LISTS = MIN_ROWS
NLI_LIST = ("premise", "entailment", "neutral", "contradiction", "other premise's hypothesis")


@dataclass(frozen=True)
class ListColumns:
    list_id: str
    rank: str
    text: str
    split: str | None


@dataclass(eq=False)
class ListSplit:
    ids: list[str]
    lists: list[list[str]]  # each: the anchor, then the members from most to least related

    def __len__(self) -> int:
        return len(self.lists)

    @property
    def sizes(self) -> list[int]:
        return [len(members) for members in self.lists]


@dataclass
class ListReport:
    """What building the lists did, shown before anything is trained or scored on them."""

    source: str  # "list file", "NLI pairs" or "labelled corpus"
    rows_read: int
    lists_kept: int
    skipped: int  # groups that could not form a list (an NLI premise lacking a label, an anchor lacking neighbours)
    split_source: str
    warnings: list[str] = field(default_factory=list)
    leaked: int = 0  # target lists that are also training lists (the same anchor and members in any order; list files)
    leaked_dropped: int = 0  # those of them dropped from the target split (drop_leaked)
    leaked_examples: list[str] = field(default_factory=list)  # the anchors of the first few leaked lists
    shared: int = 0  # target lists whose anchor also occurs in a training list (any rank), the leaked ones included
    shared_examples: list[str] = field(default_factory=list)  # the anchors of the first few such lists not leaked

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(eq=False)
class ListCorpus(LeakWords):
    """Training lists plus the target lists a model's ordering is scored on."""

    kind: ClassVar[str] = "lists"  # beside core.data.corpus.Corpus and core.data.pairs.PairCorpus
    TERMS: ClassVar[LeakTerms] = LIST_TERMS
    name: str
    train: ListSplit
    test: ListSplit
    target_split: str
    report: ListReport
    columns: ListColumns | None = None  # a list file's columns; None for derived lists
    shape: str = "chain"  # "chain": every member an anchor over the members after it; "star": member 0 the one
    # anchor (NLI and neighbour lists); what the loss trains and the ordering metrics score

    @cached_property
    def fingerprint(self) -> str:
        """Content hash: the same lists in the same splits and shape give the same key in any run (the shape
        decides what the ordering metrics score)."""
        h = hashlib.sha256(self.shape.encode("utf-8") + b"\x1d")
        for split, part in (("train", self.train), (self.target_split, self.test)):
            h.update("\x1e".join(f"{split}\x1f{i}\x1f" + "\x1f".join(members)
                                 for i, members in zip(part.ids, part.lists)).encode("utf-8"))
            h.update(b"\x1d")
        return h.hexdigest()[:16]

    @cached_property
    def content_key(self) -> str:
        """The lists as a set (each with its split and members in order), whatever their order in the file: the key
        published figures are kept under."""
        return rows_key("lists", self.shape, rows=((split, *members) for split, part in (
            ("train", self.train), (self.target_split, self.test)) for members in part.lists))

    def summary(self) -> dict:
        """JSON-ready description of the lists, for model cards, the corpus page and the CLI."""
        sizes = self.train.sizes + self.test.sizes
        return {
            "kind": "lists",
            "name": self.name,
            "source": self.report.source,
            "target_split": self.target_split,
            "lists_train": len(self.train),
            "lists_test": len(self.test),
            "list_size": [min(sizes), max(sizes)],
            "shape": self.shape,
            "split_source": self.report.split_source,
            "leaked": self.report.leaked,
            "leaked_dropped": self.report.leaked_dropped,
            "shared": self.report.shared,
            "fingerprint": self.fingerprint,
            "content_key": self.content_key,
        }


# ---------------------------------------------------------------- list files


def list_summary(corpus: ListCorpus) -> str:
    """"N lists, sizes a–b, list file": what a list corpus holds and where its lists come from, in one line (a
    list's size counts its anchor)."""
    summary = corpus.summary()
    sizes = size_range(*summary["list_size"])
    return (f"{summary['lists_train'] + summary['lists_test']:,} lists, size{'s' if '–' in sizes else ''} {sizes}, "
            f"{summary['source']}")


def size_range(low: int, high: int) -> str:
    """"4–6", or "5" when every list has the same size."""
    return f"{low}" if low == high else f"{low}–{high}"


def is_list_table(df: pd.DataFrame) -> bool:
    """True when the table has a list id and a rank column (list_id and rank, or another known pair of names)."""
    lower = names_by_lower([str(c) for c in df.columns])
    return any(n in lower for n in LIST_ID_NAMES) and any(n in lower for n in RANK_NAMES)


def detect_list_columns(df: pd.DataFrame, list_col: str | None = None, rank_col: str | None = None,
                        text_col: str | None = None, split_col: str | None = None) -> ListColumns:
    """Explicit names win; otherwise well-known names (case-insensitive)."""
    names = [str(c) for c in df.columns]
    check_unique_names(names)
    lower = names_by_lower(names)

    def pick(wanted: str | None, known: tuple[str, ...], role: str, taken: set) -> str | None:
        if wanted:
            return resolve_column(names, wanted, role)
        return next((lower[k] for k in known if k in lower and lower[k] not in taken), None)

    list_id = pick(list_col, LIST_ID_NAMES, "list id", set())
    rank = pick(rank_col, RANK_NAMES, "rank", {list_id})
    text = pick(text_col, LIST_TEXT_NAMES, "text", {list_id, rank})
    if list_id is None or rank is None or text is None:
        raise UserError(f"A list file needs a list_id, a rank and a text column (one row per list member, rank 1 = "
                        f"the anchor); the columns are: {', '.join(names)}.")
    split = pick(split_col, SPLIT_NAMES, "split", {list_id, rank, text})
    return ListColumns(list_id=list_id, rank=rank, text=text, split=split)


def _ranks(series: pd.Series, col: str) -> np.ndarray:
    """Whole numbers >= 1; a missing, fractional, non-finite or non-numeric rank is an error."""
    if pd.api.types.is_bool_dtype(series):
        raise UserError(f"Rank column '{col}' holds true/false values; ranks are whole numbers 1..n per list.")
    bad, out = [], np.zeros(len(series), dtype=np.int64)
    for i, v in enumerate(series.tolist()):
        try:
            number = float(v.strip() if isinstance(v, str) else v)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if (isinstance(v, bool) or is_missing(v) or not math.isfinite(number) or not number.is_integer() or number < 1
                or number >= 2**63):  # out holds int64
            bad.append(shorten(v))
        else:
            out[i] = int(number)
    if bad:
        shown = ", ".join(sorted(set(bad))[:5])
        raise UserError(f"Rank column '{col}' must hold whole numbers 1..n in every list; found {shown}.")
    return out


def build_lists(df: pd.DataFrame, columns: ListColumns, name: str, warnings: list[str] | None = None,
                shape: str = "chain", drop_leaked: bool = False) -> ListCorpus:
    """Group the rows into lists ordered by rank, check each, split by list (split column, else seeded 90:10);
    `shape` is what the file's order states (ListCorpus.shape).

    Target lists that are also training lists (the same anchor and the same members, in any order) and those whose
    anchor occurs in a training list are counted in the report (core.data.leakage); drop_leaked drops the first from
    the target split after splitting, so the training lists and the split of every other list stay as they were.
    """
    for col in (columns.list_id, columns.rank, columns.text, columns.split):
        if col is not None and col not in df.columns:
            raise UserError(f"There is no column named '{col}'; the columns are: {', '.join(map(str, df.columns))}.")
    warnings = list(warnings or [])
    if df.empty:
        raise UserError("The list file has no rows.")
    ids = df[columns.list_id].map(lambda v: "" if is_missing(v) else str(v).strip())
    if ids.eq("").any():
        raise UserError(f"{int(ids.eq('').sum())} rows have no list id in column '{columns.list_id}'; every member "
                        "needs the id of its list.")
    ranks = _ranks(df[columns.rank], columns.rank)
    texts = clean_texts(df[columns.text], columns.text)
    long_texts(texts.drop_duplicates(), warnings)
    splits = clean_splits(df[columns.split]) if columns.split else None
    frame = pd.DataFrame({"id": ids.to_numpy(), "rank": ranks, "text": texts.to_numpy()})
    if splits is not None:
        frame["split"] = splits.to_numpy()

    codes, order = pd.factorize(frame["id"])  # lists in order of first appearance
    frame = frame.iloc[np.lexsort((ranks, codes))].reset_index(drop=True)  # by list, then by rank
    codes = np.sort(codes)
    sizes = np.bincount(codes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    place = np.arange(len(frame)) - starts[codes] + 1  # 1..n within each list
    bad = (sizes < MIN_MEMBERS) | (sizes > MAX_MEMBERS)
    bad[codes[(frame["rank"].to_numpy() != place) | frame["text"].eq("").to_numpy()]] = True
    if splits is not None:
        bad |= frame.groupby(codes, sort=True)["split"].nunique().to_numpy() > 1
    if bad.any():  # the first list at fault, checked on its own for a precise message
        first = int(np.flatnonzero(bad)[0])
        _check_list(order[first], frame[codes == first])
    texts_by_list = np.split(frame["text"].to_numpy(dtype=object), starts[1:])
    lists = {list_id: members.tolist() for list_id, members in zip(order, texts_by_list)}
    repeats = sum(len(set(members)) < len(members) for members in lists.values())
    if repeats:
        warnings.append(f"{repeats:,} list{'s hold' if repeats > 1 else ' holds'} the same text twice (or the anchor "
                        "again): equal texts get equal cosines, a tie, so such a list never counts as in exact "
                        "order, and Kendall tau-b counts the tied pair as neither agreeing nor disagreeing.")
    list_split = dict(zip(order, frame["split"].to_numpy()[starts])) if splits is not None else {}
    if len(lists) < MIN_LISTS:
        raise UserError(f"The file holds {len(lists)} lists; provide at least {MIN_LISTS} so some can be held out.")
    order = list(order)
    if columns.split:
        per_list = train_on_validation(np.array([list_split[i] for i in order], dtype=object), columns.split,
                                       warnings)
        train, target, target_split, source = split_by_column(per_list, columns.split, warnings, seeded_holdout,
                                                              "random")
    else:
        train, target = seeded_holdout(np.arange(len(order)))
        target_split, source = "holdout", f"random {split_ratio()} of the lists, seed {SPLIT_SEED}"
    if not len(train):  # as for pairs: a file of test lists still evaluates a model (training says what it lacks)
        warnings.append(f"Split column '{columns.split}' has no 'train' lists; this corpus can evaluate a model but "
                        "not train one.")
    leaks = find_leaks([lists[order[i]] for i in train], [lists[order[i]] for i in target],
                       key=lambda members: (members[0], tuple(sorted(members[1:]))),
                       texts=lambda members: members[:1])
    leaked_rows = target[leaks.leaked]
    leaked_dropped = len(leaked_rows) if drop_leaked else 0
    if leaked_dropped:
        target = drop_leaked_rows(target, leaks, target_split, LIST_TERMS)

    def part(rows: np.ndarray) -> ListSplit:
        return ListSplit(ids=[order[i] for i in rows], lists=[lists[order[i]] for i in rows])

    if few := few_targets_warning(len(target), f"{target_split} lists"):
        warnings.append(few)
    report = ListReport(source="list file", rows_read=len(df), lists_kept=len(lists) - leaked_dropped, skipped=0,
                        split_source=source, warnings=warnings, leaked=len(leaked_rows), leaked_dropped=leaked_dropped,
                        leaked_examples=[lists[order[i]][0] for i in leaked_rows[:LEAK_EXAMPLES]],
                        shared=int(leaks.shared.sum()), shared_examples=leaks.shared_examples)
    return ListCorpus(name=name, train=part(train), test=part(target), target_split=target_split, report=report,
                      columns=columns, shape=shape)


def _check_list(list_id: str, group: pd.DataFrame) -> None:
    n, name = len(group), f"List {shorten(list_id)}"
    if n < MIN_MEMBERS:
        raise UserError(f"{name} has {n} member{'s' if n != 1 else ''}; a list needs an anchor and at "
                        f"least two texts to order ({MIN_MEMBERS} rows).")
    if n > MAX_MEMBERS:
        raise UserError(f"{name} has {n} members; at most {MAX_MEMBERS} are supported.")
    repeated = sorted(r for r, k in Counter(group["rank"]).items() if k > 1)
    if repeated:
        raise UserError(f"{name} has duplicate ranks ({', '.join(map(str, repeated))}); each member needs "
                        "its own rank.")
    if sorted(group["rank"]) != list(range(1, n + 1)):
        raise UserError(f"{name} has ranks {', '.join(map(str, sorted(group['rank'])))}; the ranks of a "
                        f"list of {n} must be 1..{n} (1 = the anchor).")
    empty = group.loc[group["text"].eq(""), "rank"]
    if len(empty):
        raise UserError(f"{name} has an empty text at rank {int(empty.min())}; fill it or remove the list.")
    if "split" in group and group["split"].nunique() > 1:
        splits = ", ".join(sorted(set(group["split"])))
        raise UserError(f"{name} has members in more than one split ({splits}); a list belongs to one split.")




def load_lists(path: str | Path, list_col: str | None = None, rank_col: str | None = None,
               text_col: str | None = None, split_col: str | None = None,
               max_bytes: int = DEFAULT_MAX_BYTES, shape: str = "chain", drop_leaked: bool = False) -> ListCorpus:
    """Read, detect columns and build in one call, as the CLI does."""
    path = Path(path)
    df, warnings = read_file(path, max_bytes)
    columns = detect_list_columns(df, list_col, rank_col, text_col, split_col)
    return build_lists(df, columns, name=path.stem, warnings=warnings, shape=shape, drop_leaked=drop_leaked)


# ---------------------------------------------------------------- derived lists


def neighbour_lists(corpus, reference, size: int, max_lists: int, seed: int = 0, progress=None,
                    train_rows: np.ndarray | None = None) -> ListCorpus:
    """Lists from a labelled corpus (core.data.corpus.Corpus; its texts, labels and split are all that is read).
    Per anchor: its `size // 2` nearest same-label texts, then its `size - size // 2` nearest other-label texts,
    each group nearest first by the reference model's cosine; searched within the anchor's own split (the train
    split's `train_rows` when given: the sample the evaluation already encodes). Up to `max_lists` training anchors
    (seeded sample); every target text is an anchor. Star lists: only the anchor's row has a known order."""
    from core.models.encode import encode_cached

    if size < MIN_MEMBERS - 1 or size > MAX_MEMBERS - 1:
        raise UserError(f"A list needs between {MIN_MEMBERS - 1} and {MAX_MEMBERS - 1} members after its anchor; "
                        f"got {size}.")
    n_same = size // 2
    parts, skipped = [], 0
    rows = np.arange(len(corpus.train_texts)) if train_rows is None else np.asarray(train_rows)
    train = ([corpus.train_texts[i] for i in rows], np.asarray(corpus.train_labels)[rows])
    for texts, labels, cap, offset in ((*train, max_lists, 0), (corpus.test_texts, corpus.test_labels, None, 1)):
        emb = encode_cached(reference, texts, progress=progress)
        part, lost = _neighbour_split(texts, np.asarray(labels), emb, n_same, size - n_same, cap, seed + offset)
        parts.append(part)
        skipped += lost
    if not len(parts[0]) or not len(parts[1]):
        raise UserError(f"Too few texts per label to form lists of {size} members (each anchor needs {n_same} other "
                        f"texts of its label and {size - n_same} of other labels in its split); choose a smaller "
                        "list size.")
    report = ListReport(source="labelled corpus", rows_read=len(corpus.train_texts) + len(corpus.test_texts),
                        lists_kept=len(parts[0]) + len(parts[1]), skipped=skipped,
                        split_source=corpus.report.split_source)
    return ListCorpus(name=corpus.name, train=parts[0], test=parts[1], target_split=corpus.target_split,
                      report=report, shape="star")


def _neighbour_split(texts: list[str], labels: np.ndarray, emb: np.ndarray, n_same: int, n_other: int,
                     cap: int | None, seed: int) -> tuple[ListSplit, int]:
    from core.data.mining import (  # FAISS: only when lists are built
        search_within,
        unit_rows,
    )

    emb = unit_rows(emb)
    anchors = np.arange(len(texts))
    if cap is not None and len(anchors) > cap:
        anchors = np.sort(np.random.default_rng(seed).choice(len(anchors), cap, replace=False))
    ids, lists, skipped = [], [], 0
    for cls in np.unique(labels[anchors]):
        mine = anchors[labels[anchors] == cls]
        same, other = np.flatnonzero(labels == cls), np.flatnonzero(labels != cls)
        near_same = search_within(emb, mine, same, n_same + 4)[1]  # headroom for the anchor and repeated texts
        near_other = search_within(emb, mine, other, n_other + 4)[1] if len(other) else [[]] * len(mine)
        for j, anchor in enumerate(mine):
            first = [i for i in near_same[j] if i >= 0 and texts[i] != texts[anchor]][:n_same]
            second = [i for i in near_other[j] if i >= 0 and texts[i] != texts[anchor]][:n_other]
            if len(first) < n_same or len(second) < n_other:
                skipped += 1
                continue
            ids.append(f"anchor-{anchor}")
            lists.append([texts[anchor], *(texts[i] for i in first), *(texts[i] for i in second)])
    order = np.argsort([int(i.split("-")[1]) for i in ids], kind="stable")
    return ListSplit(ids=[ids[i] for i in order], lists=[lists[i] for i in order]), skipped


class ListKind:
    """Ranked lists as a corpus kind (core.data.kinds.CorpusKind): a table with list_id and rank columns, one row
    per member, rank 1 the anchor; judged by ordering accuracy and Kendall tau."""

    name, title, item, unit = "lists", "a list corpus (list_id, rank, text)", "list", "lists"
    roles = {"list_id": "list_col", "rank": "rank_col", "text": "text_col", "split": "split_col"}
    required = ("list_id", "rank", "text")
    options = ("list_shape",)
    judged = False
    mined = False
    column_type = ListColumns
    figure_sets = {"lists": ("A list corpus", ("ordering_accuracy", "kendall_tau"))}

    def recognises(self, names: list[str]) -> bool:
        return is_list_table(pd.DataFrame(columns=names))

    def detect(self, df: pd.DataFrame) -> ListColumns:
        return detect_list_columns(df)

    def build(self, df: pd.DataFrame, columns: ListColumns, name: str, warnings: list[str],
              drop_leaked: bool = False, progress=None, list_shape: str = "chain") -> ListCorpus:
        return build_lists(df, columns, name=name, warnings=warnings, shape=list_shape, drop_leaked=drop_leaked)

    def load(self, path: Path, settings: dict[str, str | None], drop_leaked: bool = False,
             list_shape: str = "chain") -> ListCorpus:
        if settings.get("label_col"):
            raise UserError("label_col names a label column; a list corpus is ordered by its rank column.")
        return load_lists(path, list_col=settings.get("list_col"), rank_col=settings.get("rank_col"),
                          text_col=settings.get("text_col"), split_col=settings.get("split_col"), shape=list_shape,
                          drop_leaked=drop_leaked)

    def targets(self, corpus: ListCorpus) -> int:
        return len(corpus.test)

    def figures_key(self, corpus: ListCorpus) -> str:
        return self.name

    def cards(self, corpus: ListCorpus) -> list[tuple[str, object, str]]:
        return [count_card("Lists", len(corpus.train), len(corpus.test), corpus.target_split),
                ("Kind", self.name, list_summary(corpus))]

    def caption(self, corpus: ListCorpus, code: Callable[[str], str]) -> str:
        return list_summary(corpus)

    def summary_text(self, summary: dict, code: Callable[[str], str]) -> str:
        target = summary.get("target_split", "test")
        shape = f" {summary['shape']}" if summary.get("shape") else ""  # summaries before list shapes lack it
        return f"{summary['lists_train']} train{shape} lists, {summary['lists_test']} {target}{shape} lists"

    def texts(self, corpus: ListCorpus) -> list[str]:
        return [text for part in (corpus.train, corpus.test) for members in part.lists for text in members]

    def target_texts(self, corpus: ListCorpus) -> list[str]:
        return [text for members in corpus.test.lists for text in members]

    def evaluate(self, corpus: ListCorpus, scorer) -> dict:
        return scorer.ordering(corpus)

    def as_lists(self, corpus: ListCorpus, scorer, size: int, max_lists: int, seed: int, progress=None) -> ListCorpus:
        return corpus

    def train_pairs(self, corpus: ListCorpus) -> None:
        return None

    def export_texts(self, corpus: ListCorpus, scorer) -> tuple[list[list[str]], dict[str, list]]:
        texts = scorer.list_texts(corpus)
        return [texts], {"split": [corpus.target_split] * len(texts)}

    def evaluation_texts(self, corpus: ListCorpus, scorer) -> list[list[str]]:
        return [scorer.list_texts(corpus)]


LISTS = ListKind()
