"""Labelled corpus: texts with class labels, their columns found, cleaned and split deterministically (stratified),
read through core.data.table like every corpus kind.

Everything a user can get wrong here ends in a one-sentence `UserError`; no pandas or codec traceback
reaches the page or the CLI.
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

from core.data.lists import ListCorpus, neighbour_lists
from core.data.table import (DEFAULT_MAX_BYTES, HOLDOUT_FRACTION, LEAK_EXAMPLES, MIN_ROWS, SPLIT_NAMES, SPLIT_SEED,
                             ColumnError, check_target_values, check_unique_names, clean_labels, clean_splits,
                             clean_texts, conflict_warnings, count_card, dropped_rows, guess_label_column,
                             guess_text_column, is_split_column, kept_text, known_columns, leak_text, listed_names,
                             long_texts, missing_markers, read_file, resolve_column, rows_key, seeded_holdout,
                             sorted_classes, split_by_column, split_duplicates, split_ratio, target_warnings,
                             undetected)
from core.errors import UserError, shorten
from core.storage import ASSETS

TEXT_NAMES = ("text", "sentence", "headline", "document", "content", "review", "question", "body",
              "message", "comment", "tweet", "utterance", "query", "passage", "abstract", "title")
CLASSES_LISTED, CLASSES_SHOWN = 6, 12  # classes the sidebar and a model card name before a count of the rest
LABEL_NAMES = ("label", "labels", "class", "category", "target", "is_sarcastic", "sentiment", "topic",
               "intent", "polarity", "emotion", "class_label", "coarse_label", "fine_label", "y")


# (stage, done, total), as core.evaluation's PhaseProgress: one callback drives a page's progress bar.
Stages = Callable[[str, int, int], None]
BUILD_STAGES = ("cleaning texts", "cleaning labels", "finding duplicates", "splitting")


@dataclass(frozen=True)
class Columns:
    text: str
    label: str
    split: str | None


@dataclass
class ValidationReport:
    """What cleaning did to the file, shown to the user before anything is trained on it."""

    rows_read: int
    rows_kept: int
    empty_dropped: int
    missing_label_dropped: int
    duplicates: int  # over the whole file, as drop_duplicates drops them
    duplicates_dropped: int
    class_counts: dict[str, int]
    split_source: str
    warnings: list[str] = field(default_factory=list)
    duplicates_by_split: dict[str, int] = field(default_factory=dict)  # repeats within each split a run reads
    conflicting_by_split: dict[str, int] = field(default_factory=dict)  # texts a split holds under several labels
    leaked: int = 0  # target rows whose text is also a training text (leak_text: case, spacing, accents ignored)
    leaked_dropped: int = 0  # those of them dropped from the target split (drop_leaked)
    leaked_examples: list[str] = field(default_factory=list)  # the first few leaked texts

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(eq=False)  # numpy fields make value equality ambiguous; compare fingerprints instead
class Corpus:
    kind: ClassVar[str] = "labelled"  # beside core.data.pairs.PairCorpus
    name: str
    columns: Columns
    classes: list[str]
    train_texts: list[str]
    train_labels: np.ndarray
    test_texts: list[str]
    test_labels: np.ndarray
    target_split: str
    report: ValidationReport

    @cached_property
    def fingerprint(self) -> str:
        """Content hash used as a cache key: same texts, labels and split give the same key in any run."""
        h = hashlib.sha256()
        for split, texts, codes in (("train", self.train_texts, self.train_labels),
                                    (self.target_split, self.test_texts, self.test_labels)):
            rows = "\x1e".join(f"{split}\x1f{self.classes[c]}\x1f{t}" for t, c in zip(texts, codes))
            h.update(rows.encode("utf-8"))
            h.update(b"\x1d")
        return h.hexdigest()[:16]

    @cached_property
    def content_key(self) -> str:
        """The rows as a set (split, label, text), whatever their order: the key published figures are kept under."""
        return rows_key("labelled", rows=((split, self.classes[c], t) for split, texts, codes in (
            ("train", self.train_texts, self.train_labels), (self.target_split, self.test_texts, self.test_labels))
            for t, c in zip(texts, codes)))

    def leakage(self) -> str:
        """"10 test texts are also training texts": the report's leakage in words every front end shows, each adding
        its own remedy (the CLI a flag, the Corpus page a checkbox)."""
        n, target = self.report.leaked, self.target_split
        return (f"1 {target} text is also a training text" if n == 1 else
                f"{n:,} {target} texts are also training texts")

    def sharing(self) -> str:
        """"" : a target text shares a text with the training texts only by being one (`leakage`), unlike a pair's."""
        return ""

    def summary(self) -> dict:
        """JSON-ready description of the data, for model cards and the corpus page."""
        return {
            "name": self.name,
            "text_column": self.columns.text,
            "label_column": self.columns.label,
            "split_column": self.columns.split,
            "target_split": self.target_split,
            "rows_train": len(self.train_texts),
            "rows_test": len(self.test_texts),
            "n_classes": len(self.classes),
            "classes": list(self.classes),
            "class_counts_train": _counts(self.classes, self.train_labels),
            "class_counts_test": _counts(self.classes, self.test_labels),
            "split_source": self.report.split_source,
            "leaked": self.report.leaked,
            "leaked_dropped": self.report.leaked_dropped,
            "fingerprint": self.fingerprint,
            "content_key": self.content_key,
        }


def _counts(classes: list[str], codes: np.ndarray) -> dict[str, int]:
    per_code = np.bincount(codes, minlength=len(classes))
    return {c: int(n) for c, n in zip(classes, per_code)}


# ---------------------------------------------------------------- columns


def detect_columns(df: pd.DataFrame, text_col: str | None = None, label_col: str | None = None,
                   split_col: str | None = None) -> Columns:
    """Explicit names win; otherwise well-known names, then the only column that can fit."""
    names = [str(c) for c in df.columns]
    check_unique_names(names)
    text = resolve_column(names, text_col, "text") if text_col else None
    label = resolve_column(names, label_col, "label") if label_col else None
    split = resolve_column(names, split_col, "split") if split_col else None
    if split is None:
        split = next((c for c in known_columns(names, SPLIT_NAMES, {text, label}) if is_split_column(df[c])), None)
    label = label or next(iter(known_columns(names, LABEL_NAMES, {text, split})), None)
    text = (text or next(iter(known_columns(names, TEXT_NAMES, {label, split})), None)
            or guess_text_column(df, {label, split}))
    if text is not None:  # the one remaining column is the label only once the text column is known
        label = label or guess_label_column(df, {text, split})
    missing = tuple(role for role, col in (("text", text), ("label", label)) if col is None)
    if missing:
        raise ColumnError(undetected(missing), missing, names=names,
                          found={"text": text, "label": label, "split": split})
    if text == label:
        raise UserError(f"Column '{text}' cannot be both the text and the label; pass different --text-col and "
                        "--label-col.")
    return Columns(text=text, label=label, split=split if split not in (text, label) else None)


# ---------------------------------------------------------------- cleaning and splitting


def build_corpus(df: pd.DataFrame, columns: Columns, name: str, drop_duplicates: bool = False,
                 warnings: list[str] | None = None, progress: Stages | None = None,
                 drop_leaked: bool = False) -> Corpus:
    """Clean the rows, count what was dropped, encode labels and split train / target deterministically.

    Target texts that are also training texts (leakage: a model can score them by memory) are counted in the
    report; drop_leaked drops them from the target split after splitting, so the training rows and the split of
    every other row stay as they were.

    progress(stage, done, total) is called as each of the BUILD_STAGES starts and at the end: a 100k-row table
    takes about a second, which a page should show rather than sit still.
    """
    def stage(i: int) -> None:
        if progress:
            progress(f"Validating {len(df):,} rows: {(*BUILD_STAGES, 'done')[i]}", i, len(BUILD_STAGES))

    check_unique_names([str(c) for c in df.columns])
    for col in (columns.text, columns.label, columns.split):
        if col is not None and col not in df.columns:
            raise UserError(f"There is no column named '{col}'; the columns are: {', '.join(map(str, df.columns))}.")
    warnings = list(warnings or [])
    stage(0)
    texts = clean_texts(df[columns.text], columns.text)
    stage(1)
    labels = clean_labels(df[columns.label], columns.label)
    empty = texts.eq("").to_numpy()
    missing = labels.isna().to_numpy() & ~empty
    keep = ~empty & ~missing
    dropped_rows(missing, len(df), "label", columns.label, warnings, missing_markers(df[columns.label]))
    splits = clean_splits(df[columns.split]) if columns.split else None
    check_target_values(splits, missing, keep, "label", columns.label, columns.split)
    texts, labels = texts[keep].reset_index(drop=True), labels[keep].reset_index(drop=True).astype(str)
    splits = splits[keep].reset_index(drop=True) if splits is not None else None

    stage(2)
    said = len(warnings)  # where the split's repeated texts are said, once the splits are known
    dup_mask = texts.duplicated().to_numpy()
    if drop_duplicates:
        texts, labels = texts[~dup_mask].reset_index(drop=True), labels[~dup_mask].reset_index(drop=True)
        splits = splits[~dup_mask].reset_index(drop=True) if splits is not None else None
    _check_enough(len(df), len(texts), labels)
    long_texts(texts, warnings)

    stage(3)
    label_arr = labels.to_numpy(dtype=object)
    if splits is None:
        train, target = _stratified(np.arange(len(texts)), label_arr)
        target_split, source = "holdout", f"stratified {split_ratio()}, seed {SPLIT_SEED}"
    else:
        train, target, target_split, source = _split_by_column(splits.to_numpy(dtype=object), label_arr,
                                                               columns.split, warnings)
    if len(set(label_arr[train])) < 2:
        raise UserError("The training rows hold only one class; every class needs training rows, so check the "
                        "labels and the split column.")
    compared = texts.map(leak_text)
    leaked = target[compared.iloc[target].isin(compared.iloc[train]).to_numpy()]
    leaked_dropped = len(leaked) if drop_leaked else 0
    if leaked_dropped:
        if leaked_dropped == len(target):
            raise UserError(f"Every one of the {len(target):,} {target_split} texts is also a training text, so "
                            "dropping them would leave nothing to evaluate on; keep them or fix the split.")
        target = np.setdiff1d(target, leaked)

    repeats, conflicting = split_duplicates(texts, labels, {"train": train, target_split: target})
    warnings[said:said] = conflict_warnings(conflicting)
    warnings += target_warnings(label_arr[train], label_arr[target], target_split)
    classes = sorted_classes(set(label_arr))
    code = {c: i for i, c in enumerate(classes)}
    codes = np.array([code[c] for c in label_arr], dtype=np.int64)
    text_list = texts.tolist()
    report = ValidationReport(
        rows_read=len(df), rows_kept=len(texts) - leaked_dropped, empty_dropped=int(empty.sum()),
        missing_label_dropped=int(missing.sum()), duplicates=int(dup_mask.sum()),
        duplicates_dropped=int(dup_mask.sum()) if drop_duplicates else 0, duplicates_by_split=repeats,
        conflicting_by_split=conflicting,
        class_counts=_counts(classes, np.delete(codes, leaked[:leaked_dropped])), split_source=source,
        warnings=warnings,
        leaked=len(leaked), leaked_dropped=leaked_dropped,
        leaked_examples=[text_list[i] for i in leaked[:LEAK_EXAMPLES]])
    corpus = Corpus(name=name, columns=columns, classes=classes,
                    train_texts=[text_list[i] for i in train], train_labels=codes[train],
                    test_texts=[text_list[i] for i in target], test_labels=codes[target],
                    target_split=target_split, report=report)
    stage(len(BUILD_STAGES))
    return corpus


def _check_enough(rows_read: int, rows_kept: int, labels: pd.Series) -> None:
    if rows_kept == 0:
        raise UserError(f"None of the {rows_read} rows has both a text and a label; check the text and label columns.")
    classes = labels.unique()
    if len(classes) < 2:
        raise UserError(f"Only one class ({shorten(classes[0])}) is left after cleaning; contrastive fine-tuning needs "
                        "at least two labels.")
    if rows_kept < MIN_ROWS:
        raise UserError(f"Only {rows_kept} usable rows are left after cleaning; provide at least {MIN_ROWS} labelled "
                        "texts so a train/test split is possible.")


def _stratified(rows: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seeded 90:10 split keeping class proportions; both halves in file order."""
    counts = Counter(labels[rows])
    single = sorted(c for c, n in counts.items() if n < 2)
    if single:
        raise UserError(f"Class {shorten(single[0])} has only one row, too few for a stratified train/test split; "
                        "add rows for it or remove it.")
    n_hold = math.ceil(HOLDOUT_FRACTION * len(rows))
    if n_hold < len(counts) or len(rows) - n_hold < len(counts):
        raise UserError(f"{len(rows)} rows are too few for a stratified {split_ratio()} split over {len(counts)} "
                        f"classes; provide at least {math.ceil(len(counts) / HOLDOUT_FRACTION)} rows.")
    return seeded_holdout(rows, labels[rows])


def _split_by_column(splits: np.ndarray, labels: np.ndarray, col: str,
                     warnings: list[str]) -> tuple[np.ndarray, np.ndarray, str, str]:
    """A labelled corpus needs 'train' rows; the targets as split_by_column chooses them (stratified holdout)."""
    if not np.any(splits == "train"):
        raise UserError(f"Split column '{col}' has no labelled 'train' rows; mark training rows as 'train', choose "
                        "another split column, or rename this one to have a 90:10 split made instead.")
    return split_by_column(splits, col, warnings, lambda train: _stratified(train, labels), "stratified")


# ---------------------------------------------------------------- files


def load_corpus(path: str | Path, text_col: str | None = None, label_col: str | None = None,
                split_col: str | None = None, drop_duplicates: bool = False,
                max_bytes: int = DEFAULT_MAX_BYTES, drop_leaked: bool = False) -> Corpus:
    """Read, detect columns and build in one call, as the CLI and the demo button do."""
    path = Path(path)
    df, warnings = read_file(path, max_bytes)
    columns = detect_columns(df, text_col, label_col, split_col)
    return build_corpus(df, columns, name=path.stem, drop_duplicates=drop_duplicates, warnings=warnings,
                        drop_leaked=drop_leaked)


class LabelledKind:
    """Texts with class labels as a corpus kind (core.data.kinds.CorpusKind): any table another kind does not
    recognise, its text and label columns found (detect_columns) or picked; judged by P@k and S@k (the reference
    model the judge), kNN and a linear probe."""

    name, title, item, unit = "labelled", "a labelled corpus (text, label)", "text", "texts"
    roles = {"text": "text_col", "label": "label_col", "split": "split_col"}
    required = ("text", "label")
    options = ("drop_duplicates",)
    judged = True
    mined = True
    column_type = Columns
    figure_sets = {"labelled": ("A labelled corpus", ("polarity", "similarity", "knn_accuracy", "linear_accuracy"))}

    def recognises(self, names: list[str]) -> bool:
        return True  # asked last: its columns are found or picked once the table is read

    detect = staticmethod(detect_columns)

    def build(self, df: pd.DataFrame, columns: Columns, name: str, warnings: list[str], drop_leaked: bool = False,
              progress: Stages | None = None, drop_duplicates: bool = False) -> Corpus:
        return build_corpus(df, columns, name=name, drop_duplicates=drop_duplicates, warnings=warnings,
                            progress=progress, drop_leaked=drop_leaked)

    def load(self, path: Path, settings: dict[str, str | None], drop_leaked: bool = False,
             drop_duplicates: bool = False) -> Corpus:
        return load_corpus(path, text_col=settings.get("text_col"), label_col=settings.get("label_col"),
                           split_col=settings.get("split_col"), drop_duplicates=drop_duplicates,
                           drop_leaked=drop_leaked)

    def targets(self, corpus: Corpus) -> int:
        return len(corpus.test_texts)

    def figures_key(self, corpus: Corpus) -> str:
        return self.name

    def cards(self, corpus: Corpus) -> list[tuple[str, object, str]]:
        return [count_card("Texts", len(corpus.train_texts), len(corpus.test_texts), corpus.target_split),
                ("Classes", len(corpus.classes), ", ".join(corpus.classes))]

    def caption(self, corpus: Corpus, code: Callable[[str], str]) -> str:
        used = len(corpus.train_texts) + len(corpus.test_texts)
        listed = listed_names(corpus.classes, CLASSES_LISTED, code)
        return f"{kept_text(corpus.report.rows_kept, used, 'rows')} · {len(corpus.classes)} classes: {listed}"

    def summary_text(self, summary: dict, code: Callable[[str], str]) -> str:
        target = summary.get("target_split", "test")
        rows = f"{summary.get('rows_train', '?')} train rows, {summary.get('rows_test', '?')} {target} rows"
        classes = [str(c) for c in summary.get("classes", [])]
        n_classes = summary.get("n_classes", len(classes) or "?")
        return f"{rows}, {n_classes} classes" + (f" ({listed_names(classes, CLASSES_SHOWN, code)})" if classes else "")

    def texts(self, corpus: Corpus) -> list[str]:
        return corpus.train_texts + corpus.test_texts

    def target_texts(self, corpus: Corpus) -> list[str]:
        return list(corpus.test_texts)

    def evaluate(self, corpus: Corpus, scorer) -> dict:
        return scorer.retrieval(corpus)

    def as_lists(self, corpus: Corpus, scorer, size: int, max_lists: int, seed: int, progress=None) -> ListCorpus:
        """Neighbour lists of up to `max_lists` anchors of the train sample the evaluation encodes (as mining)."""
        return neighbour_lists(corpus, scorer.reference, size, max_lists, seed, progress,
                               train_rows=scorer.sample(corpus).train_rows)

    def train_pairs(self, corpus: Corpus) -> None:
        return None  # its pairs are mined from the labels (core.data.mining)

    def export_texts(self, corpus: Corpus, scorer) -> tuple[list[list[str]], dict[str, list]]:
        sets = scorer.sample(corpus)  # the train sample and the test split, encoded apart as the evaluation does
        labels = [corpus.classes[i] for i in [*sets.train_labels, *corpus.test_labels]]
        split = ["train"] * len(sets.train_rows) + [corpus.target_split] * len(corpus.test_texts)
        return [sets.train_texts, list(corpus.test_texts)], {"label": labels, "split": split}

    def evaluation_texts(self, corpus: Corpus, scorer) -> list[list[str]]:
        return [scorer.train_sample(corpus), list(corpus.test_texts)]


LABELLED = LabelledKind()


def demo_corpus_path() -> Path:
    return ASSETS / "demo_corpus.csv"


def demo_documents_path() -> Path:
    return ASSETS / "demo_documents.csv"
