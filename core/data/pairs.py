"""Pair corpus: (text1, text2) rows with a similarity score, an NLI label or both, read and checked like a
labelled corpus and split deterministically.

Labels are ordinal in the opposite direction of scores: entailment 0 < neutral 1 < contradiction 2, so a
smaller label means MORE related, while a larger score means more related.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from statistics import NormalDist
from typing import ClassVar

import numpy as np
import pandas as pd

from core.data.leakage import (
    PAIR_TERMS,
    LeakTerms,
    LeakWords,
    drop_leaked_rows,
    find_leaks,
)
from core.data.lists import ListCorpus, ListReport, ListSplit
from core.data.table import (
    DEFAULT_MAX_BYTES,
    HOLDOUT_FRACTION,
    LEAK_EXAMPLES,
    MIN_ROWS,
    SPLIT_NAMES,
    SPLIT_SEED,
    SPLIT_VALUES,
    VALIDATION_NAMES,
    check_target_values,
    check_unique_names,
    clean_splits,
    clean_texts,
    count_card,
    dropped_rows,
    is_missing,
    kept_text,
    leak_text,
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

NLI_LABELS = ("entailment", "neutral", "contradiction")  # ordinal: 0 = most related
TEXT_PAIR_NAMES = (("text1", "text2"), ("sentence1", "sentence2"))
SCORE_NAMES = ("score", "similarity", "similarity_score", "relatedness_score", "gold_score")
PAIR_LABEL_NAMES = ("label", "gold_label", "nli_label")
SHOWN_VALUES = 5
SAME_TEXT_REFUSED = 0.9  # share of target pairs with two identical texts from which the split measures nothing
MIN_SCORED_PAIRS = 10  # fewer scored target pairs: STS Spearman over them means nothing, so it is refused
FEW_SCORED_PAIRS = 100  # fewer: STS Spearman is computed, with a warning that its 95% interval is wide


@dataclass(frozen=True)
class PairColumns:
    text1: str
    text2: str
    score: str | None
    label: str | None
    split: str | None


@dataclass(eq=False)  # numpy fields make value equality ambiguous
class PairSplit:
    text1: list[str]
    text2: list[str]
    scores: np.ndarray  # float64; NaN everywhere without a score column
    labels: np.ndarray  # int64 index into NLI_LABELS (0 = most related); -1 everywhere without a label column

    def __len__(self) -> int:
        return len(self.text1)


@dataclass
class PairReport:
    """What cleaning did to the file, shown before anything is trained or scored on it."""

    rows_read: int
    rows_kept: int
    empty_dropped: int
    missing_score_dropped: int
    missing_label_dropped: int
    duplicates: int
    label_counts: dict[str, int] | None
    split_source: str
    warnings: list[str] = field(default_factory=list)
    leaked: int = 0  # target pairs that are also training pairs (the same two texts in either order, after cleaning)
    leaked_dropped: int = 0  # those of them dropped from the target split (drop_leaked)
    leaked_examples: list[list[str]] = field(default_factory=list)  # the first few leaked pairs, [text1, text2]
    shared: int = 0  # target pairs with a text that also occurs in a training pair, the leaked ones included
    shared_examples: list[str] = field(default_factory=list)  # texts shared by the first few pairs not leaked

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(eq=False)
class PairCorpus(LeakWords):
    """Training pairs plus the target pairs a model is scored on, with what cleaning did."""

    kind: ClassVar[str] = "pairs"  # beside core.data.corpus.Corpus
    TERMS: ClassVar[LeakTerms] = PAIR_TERMS
    name: str
    columns: PairColumns
    train: PairSplit
    test: PairSplit
    target_split: str
    report: PairReport

    @cached_property
    def fingerprint(self) -> str:
        """Content hash used as a cache key: same pairs, scores, labels and split give the same key in any run."""
        h = hashlib.sha256()
        for split, part in (("train", self.train), (self.target_split, self.test)):
            rows = "\x1e".join(f"{split}\x1f{a}\x1f{b}\x1f{s!r}\x1f{lab}"
                               for a, b, s, lab in zip(part.text1, part.text2, part.scores.tolist(),
                                                       part.labels.tolist()))
            h.update(rows.encode("utf-8"))
            h.update(b"\x1d")
        return h.hexdigest()[:16]

    @cached_property
    def content_key(self) -> str:
        """The pairs as a set, each either way round (cosine is symmetric), whatever their order: the key published
        figures are kept under."""
        return rows_key("pairs", rows=((split, *sorted((a, b)), s, lab) for split, part in (
            ("train", self.train), (self.target_split, self.test))
            for a, b, s, lab in zip(part.text1, part.text2, part.scores.tolist(), part.labels.tolist())))

    def summary(self) -> dict:
        """JSON-ready description of the data, for model cards, the corpus page and the CLI."""
        scores = np.concatenate([self.train.scores, self.test.scores])
        return {
            "kind": "pairs",
            "name": self.name,
            "text1_column": self.columns.text1,
            "text2_column": self.columns.text2,
            "score_column": self.columns.score,
            "label_column": self.columns.label,
            "split_column": self.columns.split,
            "target_split": self.target_split,
            "rows_train": len(self.train),
            "rows_test": len(self.test),
            "score_range": [float(scores.min()), float(scores.max())] if self.columns.score else None,
            "label_counts": self.report.label_counts,
            "split_source": self.report.split_source,
            "leaked": self.report.leaked,
            "leaked_dropped": self.report.leaked_dropped,
            "shared": self.report.shared,
            "fingerprint": self.fingerprint,
            "content_key": self.content_key,
        }


def pair_summary(corpus: PairCorpus) -> str:
    """"N pairs, scores x–y, labels entailment n · ...": what a pair corpus holds, in one line; N is the pairs kept,
    as the report's card counts them, with how many of them train or score where a split is left unused."""
    summary = corpus.summary()
    parts = [kept_text(corpus.report.rows_kept, summary["rows_train"] + summary["rows_test"], "pairs")]
    if summary["score_range"] is not None:
        low, high = summary["score_range"]
        parts.append(f"scores {low:g}–{high:g}")
    if summary["label_counts"] is not None:
        parts.append("labels " + " · ".join(f"{word} {n:,}" for word, n in summary["label_counts"].items()))
    return ", ".join(parts)


# ---------------------------------------------------------------- columns


def is_pair_table(df: pd.DataFrame) -> bool:
    """True when the table has a text1 and a text2 column (or sentence1 and sentence2), in any case."""
    lower = names_by_lower([str(c) for c in df.columns])
    return any(a in lower and b in lower for a, b in TEXT_PAIR_NAMES)


def detect_pair_columns(df: pd.DataFrame, text1_col: str | None = None, text2_col: str | None = None,
                        score_col: str | None = None, label_col: str | None = None,
                        split_col: str | None = None) -> PairColumns:
    """Explicit names win; otherwise well-known names (case-insensitive)."""
    names = [str(c) for c in df.columns]
    check_unique_names(names)
    lower = names_by_lower(names)
    text1 = resolve_column(names, text1_col, "text1") if text1_col else None
    text2 = resolve_column(names, text2_col, "text2") if text2_col else None
    if text1 is None or text2 is None:
        known = next(((lower[a], lower[b]) for a, b in TEXT_PAIR_NAMES if a in lower and b in lower), (None, None))
        text1, text2 = text1 or known[0], text2 or known[1]
    if text1 is None or text2 is None:
        raise UserError(f"A pair corpus needs a text1 and a text2 column (or sentence1 and sentence2); the columns "
                        f"are: {', '.join(names)}.")
    taken = {text1, text2}
    score = resolve_column(names, score_col, "score") if score_col else _first(lower, SCORE_NAMES, taken)
    label = resolve_column(names, label_col, "label") if label_col else _first(lower, PAIR_LABEL_NAMES, taken | {score})
    if score is None and label is None:
        raise UserError(f"A pair corpus needs a score column ({', '.join(SCORE_NAMES)}) or an NLI label column "
                        f"({', '.join(PAIR_LABEL_NAMES)}); the columns are: {', '.join(names)}.")
    taken |= {score, label}
    if split_col:
        split = resolve_column(names, split_col, "split")
    else:
        split = next((lower[k] for k in SPLIT_NAMES if k in lower and lower[k] not in taken
                      and clean_splits(df[lower[k]]).isin(SPLIT_VALUES).any()), None)
    return PairColumns(text1=text1, text2=text2, score=score, label=label, split=split)


def _first(lower: dict[str, str], known: tuple[str, ...], taken: set) -> str | None:
    return next((lower[k] for k in known if k in lower and lower[k] not in taken), None)


# ---------------------------------------------------------------- cleaning and splitting


def build_pairs(df: pd.DataFrame, columns: PairColumns, name: str, warnings: list[str] | None = None,
                drop_leaked: bool = False, picks: str | None = None) -> PairCorpus:
    """Clean the rows, count what was dropped, encode scores and labels, split train / target deterministically.

    Target pairs that are also training pairs (the same two texts in either order) and those sharing a text with a
    training pair are counted in the report (core.data.leakage); drop_leaked drops the first from the target split
    after splitting, so the training pairs and the split of every other pair stay as they were. `picks` names the
    split a run picks its checkpoint on (select_split): its rows are used, so not reported unused.
    """
    check_unique_names([str(c) for c in df.columns])
    for col in (columns.text1, columns.text2, columns.score, columns.label, columns.split):
        if col is not None and col not in df.columns:
            raise UserError(f"There is no column named '{col}'; the columns are: {', '.join(map(str, df.columns))}.")
    if columns.score is None and columns.label is None:
        raise UserError("A pair corpus needs a score column or an NLI label column; name one of them.")
    warnings = list(warnings or [])
    text1 = clean_texts(df[columns.text1], columns.text1).to_numpy(dtype=object)
    text2 = clean_texts(df[columns.text2], columns.text2).to_numpy(dtype=object)
    n = len(df)
    scores = _clean_scores(df[columns.score], columns.score) if columns.score else np.full(n, np.nan)
    labels = _clean_labels(df[columns.label], columns.label) if columns.label else np.full(n, -1, dtype=np.int64)

    empty = (text1 == "") | (text2 == "")
    missing_score = ~empty & np.isnan(scores) if columns.score else np.zeros(n, dtype=bool)
    missing_label = ~empty & (labels < 0) if columns.label else np.zeros(n, dtype=bool)
    keep = ~empty & ~missing_score & ~missing_label
    if empty.any():
        warnings.append(f"{int(empty.sum()):,} of {n:,} rows dropped because a text is empty "
                        f"({int((text1 == '').sum()):,} in '{columns.text1}', {int((text2 == '').sum()):,} in "
                        f"'{columns.text2}').")
    splits = clean_splits(df[columns.split]) if columns.split else None
    for missing, what, column in ((missing_score, "score", columns.score), (missing_label, "label", columns.label)):
        if column:
            dropped_rows(missing, n, what, column, warnings)
            check_target_values(splits, missing, keep, what, column, columns.split)
    text1, text2, scores, labels = text1[keep], text2[keep], scores[keep], labels[keep]
    long_texts(pd.Series(pd.unique(np.concatenate([text1, text2])), dtype=object), warnings)
    if columns.score:
        _check_float32(scores, columns.score, warnings)
    if len(text1) < MIN_ROWS:
        raise UserError(f"Only {len(text1)} usable pairs are left after cleaning; provide at least {MIN_ROWS} pairs "
                        "with both texts and a score or label.")
    duplicates = int(pd.DataFrame({"a": text1, "b": text2}).duplicated().sum())
    if duplicates:
        warnings.append(f"{duplicates} {'pair appears' if duplicates == 1 else 'pairs appear'} more than once; kept.")

    if columns.split:
        train, target, target_split, source = _split_by_column(splits.to_numpy()[keep],
                                                               columns.split, warnings, picks)
    else:
        train, target = seeded_holdout(np.arange(len(text1)))
        target_split, source = "holdout", f"random {split_ratio()}, seed {SPLIT_SEED}"
    leaks = find_leaks(list(zip(text1[train], text2[train])), list(zip(text1[target], text2[target])),
                       key=lambda pair: tuple(sorted(pair)), texts=lambda pair: pair)
    leaked_rows = target[leaks.leaked]
    leaked_dropped = len(leaked_rows) if drop_leaked else 0
    if leaked_dropped:
        target = drop_leaked_rows(target, leaks, target_split, PAIR_TERMS)

    if columns.score:
        _check_scored(len(target), target_split, columns.split, warnings, leaked_dropped)
    _check_sameness(text1, text2, target, target_split, warnings)

    label_counts = None
    if columns.label:
        per_code = np.bincount(labels, minlength=len(NLI_LABELS))
        label_counts = {word: int(k) for word, k in zip(NLI_LABELS, per_code)}
    report = PairReport(rows_read=n, rows_kept=len(text1) - leaked_dropped, empty_dropped=int(empty.sum()),
                        missing_score_dropped=int(missing_score.sum()),
                        missing_label_dropped=int(missing_label.sum()), duplicates=duplicates,
                        label_counts=label_counts, split_source=source, warnings=warnings,
                        leaked=len(leaked_rows), leaked_dropped=leaked_dropped,
                        leaked_examples=[[text1[i], text2[i]] for i in leaked_rows[:LEAK_EXAMPLES]],
                        shared=int(leaks.shared.sum()), shared_examples=leaks.shared_examples)

    def part(rows: np.ndarray) -> PairSplit:
        return PairSplit(text1=text1[rows].tolist(), text2=text2[rows].tolist(), scores=scores[rows],
                         labels=labels[rows])

    return PairCorpus(name=name, columns=columns, train=part(train), test=part(target), target_split=target_split,
                      report=report)


def _check_float32(scores: np.ndarray, col: str, warnings: list[str]) -> None:
    """Training hands scores to the model as float32 (sentence-transformers' collator): a score beyond its range
    would become infinite, so it is refused; distinct scores that float32 merges are counted in a warning."""
    big = np.abs(scores) > np.finfo(np.float32).max
    if big.any():
        n = int(big.sum())
        raise UserError(f"{n:,} {'score' if n == 1 else 'scores'} in '{col}' {'is' if n == 1 else 'are'} beyond what "
                        "float32 holds (about ±3.4e38), which training would turn into infinities; rescale the column.")
    merged = len(np.unique(scores)) - len(np.unique(scores.astype(np.float32)))
    if merged:
        warnings.append(f"{merged:,} distinct scores in '{col}' become equal at float32 precision, which training "
                        "uses; rescale the column if their order matters.")


def _check_scored(n: int, target_split: str, split_col: str | None, warnings: list[str], leaked_dropped: int = 0
                  ) -> None:
    """STS Spearman is computed on the n scored target pairs: fewer than MIN_SCORED_PAIRS are refused (a figure like
    "100.00, n = 2" means nothing), fewer than FEW_SCORED_PAIRS are warned of with the width of the 95% interval (at
    a Spearman of 0, where it is widest; an evaluation states the figure's own interval). Where drop_leaked dropped
    `leaked_dropped` of them, that is what the refusal names."""
    if n < MIN_SCORED_PAIRS:
        if leaked_dropped and n + leaked_dropped >= MIN_SCORED_PAIRS:
            raise UserError(f"Dropping the {leaked_dropped} {target_split} pairs that are also training pairs "
                            f"(drop_leaked) left {n}, fewer than the {MIN_SCORED_PAIRS} STS Spearman needs; keep them "
                            f"(and read the figure with the leak in mind), or add {target_split} pairs.")
        if target_split == "holdout":
            rows = next(k for k in range(MIN_SCORED_PAIRS, 100 * MIN_SCORED_PAIRS)
                        if math.ceil(k * HOLDOUT_FRACTION) >= MIN_SCORED_PAIRS)  # as train_test_split rounds
            fix = (f"provide at least {rows} scored pairs to hold out {split_ratio()}"
                   + (f", or give {MIN_SCORED_PAIRS} or more of them the split 'test' in column '{split_col}'"
                      if split_col else ", or a split column with that many 'test' rows"))
        else:
            fix = f"give at least {MIN_SCORED_PAIRS} scored pairs the split '{target_split}' in column '{split_col}'"
        raise UserError(f"STS Spearman would be computed on {n} {target_split} pairs, fewer than the "
                        f"{MIN_SCORED_PAIRS} it needs to mean anything; {fix}.")
    if n < FEW_SCORED_PAIRS:
        half = 100 * math.tanh(NormalDist().inv_cdf(0.975) / math.sqrt(n - 3))  # Fisher z, as spearman_ci
        warnings.append(f"STS Spearman is computed on only {n} {target_split} pairs, so its 95% interval is wide: "
                        f"about ±{half:.0f} points around a Spearman of 0 (each evaluation states its own interval); "
                        f"{FEW_SCORED_PAIRS} or more pairs narrow it.")


def _check_sameness(text1: np.ndarray, text2: np.ndarray, target: np.ndarray, target_split: str,
                    warnings: list[str]) -> None:
    """A pair whose two texts are the same has cosine 1 under any model: a target split of such pairs measures
    nothing (refused); some of them are counted in a warning."""
    same = text1 == text2
    if len(target) and same[target].mean() >= SAME_TEXT_REFUSED:
        raise UserError(f"{int(same[target].sum()):,} of the {len(target):,} {target_split} pairs have two identical "
                        "texts, whose cosine is 1 under any model, so there is nothing to evaluate; check that "
                        "text1 and text2 name different columns.")
    if same.any():
        n = int(same.sum())
        warnings.append(f"{n:,} {'pair has' if n == 1 else 'pairs have'} two identical texts (cosine 1 under any "
                        "model).")
    # Texts that differ only in case, spacing or accents are one text to an uncased model (cosine 1 up to rounding),
    # as leakage compares them; the STS evaluation refuses a split of only such pairs by the model's own tokens.
    alike = ~same & np.array([leak_text(a) == leak_text(b) for a, b in zip(text1, text2)], dtype=bool)
    if alike.any():
        n = int(alike.sum())
        warnings.append(f"{n:,} more {'pair differs' if n == 1 else 'pairs differ'} only in case, spacing or accents "
                        "(cosine 1 under an uncased model, whatever the gold score).")


def _clean_scores(series: pd.Series, col: str) -> np.ndarray:
    """Finite floats; only an empty cell is missing (NaN), so a cell reading "NaN" or "inf" is an error."""
    if pd.api.types.is_bool_dtype(series):
        raise UserError(f"Score column '{col}' holds true/false values, not scores; name a column of numbers.")
    if pd.api.types.is_numeric_dtype(series):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = [shorten(v) for v in values.tolist() if math.isinf(v)]
    else:
        values, bad = np.full(len(series), np.nan), []
        for i, v in enumerate(series.tolist()):
            if is_missing(v) or (isinstance(v, str) and not v.strip()):
                continue
            try:
                number = float(v.strip() if isinstance(v, str) else v)
            except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON integer beyond any float
                number = math.nan
            if isinstance(v, bool) or not math.isfinite(number):
                bad.append(shorten(v))
            else:
                values[i] = number
    if bad:
        raise UserError(f"Score column '{col}' must hold finite numbers; found {_listed(bad)}.")
    return values


def _clean_labels(series: pd.Series, col: str) -> np.ndarray:
    """Codes 0, 1, 2 from NLI words (any case) or the integers 0, 1, 2; -1 where the cell is empty."""
    codes, unknown = np.full(len(series), -1, dtype=np.int64), []
    words = {w: i for i, w in enumerate(NLI_LABELS)}
    for i, v in enumerate(series.tolist()):
        if is_missing(v) or (isinstance(v, str) and not v.strip()):
            continue
        if isinstance(v, bool):
            code = None
        else:
            code = words.get(v.strip().lower(), _as_code(v)) if isinstance(v, str) else _as_code(v)
        if code is not None:
            codes[i] = code
        else:
            unknown.append(shorten(v))
    if unknown:
        raise UserError(f"Label column '{col}' must hold {', '.join(NLI_LABELS)} or 0, 1, 2 "
                        f"(0 = most related); found {_listed(unknown)}.")
    return codes


def _as_code(value) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(number) if number in (0, 1, 2) else None


def _listed(values: list[str]) -> str:
    distinct = sorted(set(values))
    more = f" and {len(distinct) - SHOWN_VALUES} more" if len(distinct) > SHOWN_VALUES else ""
    return ", ".join(distinct[:SHOWN_VALUES]) + more




def _split_by_column(splits: np.ndarray, col: str, warnings: list[str],
                     picks: str | None = None) -> tuple[np.ndarray, np.ndarray, str, str]:
    """The targets as core.data.table.split_by_column chooses them (random holdout), after train_on_validation; a
    pair corpus without 'train' rows can still evaluate a model. `picks`: the split a run picks its checkpoint on,
    used, so not reported unused."""
    splits = train_on_validation(splits, col, warnings)
    n_train = int(np.sum(splits == "train"))
    if not np.isin(splits, ("test", *VALIDATION_NAMES)).any() and n_train < MIN_ROWS:
        raise UserError(f"Split column '{col}' leaves no pairs to evaluate on: it has no 'test' or 'validation' "
                        f"rows and {n_train} 'train' rows, fewer than the {MIN_ROWS} needed to hold some out.")
    if not n_train:
        warnings.append(f"Split column '{col}' has no 'train' rows; this corpus can evaluate a model but not "
                        "train one.")
    return split_by_column(splits, col, warnings, seeded_holdout, "random", picks)


# ---------------------------------------------------------------- lists from pairs


def nli_lists(pairs: PairCorpus, seed: int = 0) -> ListCorpus:
    """Per premise: the premise, one entailment, one neutral and one contradiction hypothesis (the first of each in
    file order), then a random hypothesis of another premise (seeded); premises lacking a label are skipped. Star
    lists: only the premise's row has a known order."""
    if pairs.columns.label is None:
        raise UserError(f"{pairs.name} has no NLI label column, so its pairs give no list order; lists from pairs "
                        "need entailment / neutral / contradiction labels.")
    train, skipped_train = _premise_lists(pairs.train, seed)
    test, skipped_test = _premise_lists(pairs.test, seed + 1)
    if not len(test):
        raise UserError(f"No premise of the {pairs.target_split} split has an entailment, a neutral and a "
                        "contradiction hypothesis, so there are no lists to evaluate on.")
    report = ListReport(source="NLI pairs", rows_read=len(pairs.train) + len(pairs.test),
                        lists_kept=len(train) + len(test), skipped=skipped_train + skipped_test,
                        split_source=pairs.report.split_source, warnings=list(pairs.report.warnings))
    return ListCorpus(name=pairs.name, train=train, test=test, target_split=pairs.target_split, report=report,
                      shape="star")


def _premise_lists(split: PairSplit, seed: int) -> tuple[ListSplit, int]:
    by_premise: dict[str, dict[int, str]] = {}
    for premise, hypothesis, label in zip(split.text1, split.text2, split.labels.tolist()):
        by_premise.setdefault(premise, {}).setdefault(int(label), hypothesis)
    complete = [p for p, hyp in by_premise.items() if all(code in hyp for code in range(3))]
    if len(by_premise) < 2:  # no other premise to draw the last member from
        return ListSplit(ids=[], lists=[]), len(by_premise)
    rng = np.random.default_rng(seed)
    ids, lists = [], []
    for i, premise in enumerate(complete):
        row = int(rng.integers(len(split)))
        while split.text1[row] == premise:  # a hypothesis of this very premise is redrawn
            row = int(rng.integers(len(split)))
        other = split.text2[row]
        hyp = by_premise[premise]
        ids.append(f"premise-{i}")
        lists.append([premise, hyp[0], hyp[1], hyp[2], other])
    return ListSplit(ids=ids, lists=lists), len(by_premise) - len(complete)


# ---------------------------------------------------------------- files


def load_pairs(path: str | Path, text1_col: str | None = None, text2_col: str | None = None,
               score_col: str | None = None, label_col: str | None = None, split_col: str | None = None,
               max_bytes: int = DEFAULT_MAX_BYTES, drop_leaked: bool = False, picks: str | None = None) -> PairCorpus:
    """Read, detect columns and build in one call, as the CLI does; `picks` as build_pairs."""
    path = Path(path)
    df, warnings = read_file(path, max_bytes)
    columns = detect_pair_columns(df, text1_col, text2_col, score_col, label_col, split_col)
    return build_pairs(df, columns, name=path.stem, warnings=warnings, drop_leaked=drop_leaked, picks=picks)


def load_pair_split(path: str | Path, split: str, max_bytes: int = DEFAULT_MAX_BYTES) -> PairCorpus:
    """One split of a pair file as the target pairs of a corpus with no training pairs, read and cleaned as load_pairs
    reads the file: a split the file does not report on, such as the validation pairs a run picks its checkpoint on
    (core.training.selection). `split` is a split value as the loader compares them (trimmed, lower case). A file
    without it, or with too few usable pairs in it, is one UserError line naming the splits the file has."""
    path = Path(path)
    df, warnings = read_file(path, max_bytes)
    columns = detect_pair_columns(df)
    if columns.split is None:
        raise UserError(f"{path.name} has no split column ({', '.join(SPLIT_NAMES)}), so no split {shorten(split)}.")
    splits = clean_splits(df[columns.split])
    has = ", ".join(f"{shorten(name or '(empty)')} ({n:,} rows)"
                    for name, n in splits.value_counts(sort=False).items())
    rows = df[(splits == split).to_numpy()]
    if not len(rows):
        raise UserError(f"{path.name} has no split {shorten(split)} in column '{columns.split}'; its splits: {has}.")
    if len(rows) < MIN_SCORED_PAIRS:
        raise UserError(f"{path.name} has only {len(rows)} rows of split {shorten(split)} in column "
                        f"'{columns.split}', fewer than the {MIN_SCORED_PAIRS} pairs an STS Spearman needs; its "
                        f"splits: {has}.")
    try:  # the split's rows alone, as the file's target split
        view = build_pairs(rows.assign(**{columns.split: "test"}), columns, path.stem, warnings)
    except UserError as exc:
        raise UserError(f"Split {shorten(split)} of {path.name} (its splits: {has}): {exc}") from exc
    return replace(view, target_split=split)


class PairKind:
    """Sentence pairs as a corpus kind (core.data.kinds.CorpusKind): a table with text1 and text2 columns (or
    sentence1 and sentence2), a score and / or an NLI label per pair; judged by STS Spearman where it has scores."""

    name, title, item, unit = "pairs", "a pair corpus (text1, text2, score or label)", "pair", "pairs"
    roles = {"text1": "text1_col", "text2": "text2_col", "score": "score_col", "label": "label_col",
             "split": "split_col"}
    required = ("text1", "text2")
    options = ()
    judged = False
    mined = False
    column_type = PairColumns
    figure_sets = {"pairs": ("A pair corpus", ("sts_spearman",)),
                   "unscored pairs": ("A pair corpus without a score column", ())}  # NLI labels only: no gold score

    def recognises(self, names: list[str]) -> bool:
        return is_pair_table(pd.DataFrame(columns=names))

    def detect(self, df: pd.DataFrame) -> PairColumns:
        return detect_pair_columns(df)

    def build(self, df: pd.DataFrame, columns: PairColumns, name: str, warnings: list[str],
              drop_leaked: bool = False, progress=None) -> PairCorpus:
        return build_pairs(df, columns, name=name, warnings=warnings, drop_leaked=drop_leaked)

    def load(self, path: Path, settings: dict[str, str | None], drop_leaked: bool = False) -> PairCorpus:
        if settings.get("text_col"):
            raise UserError("text_col names the text column of a labelled corpus; a pair corpus reads its text1 and "
                            "text2 columns (text1_col, text2_col).")
        return load_pairs(path, text1_col=settings.get("text1_col"), text2_col=settings.get("text2_col"),
                          score_col=settings.get("score_col"), label_col=settings.get("label_col"),
                          split_col=settings.get("split_col"), drop_leaked=drop_leaked)

    def targets(self, corpus: PairCorpus) -> int:
        return len(corpus.test)

    def figures_key(self, corpus: PairCorpus) -> str:
        return "unscored pairs" if corpus.columns.score is None else self.name

    def cards(self, corpus: PairCorpus) -> list[tuple[str, object, str]]:
        return [count_card("Pairs", len(corpus.train), len(corpus.test), corpus.target_split),
                ("Kind", self.name, pair_summary(corpus))]

    def caption(self, corpus: PairCorpus, code: Callable[[str], str]) -> str:
        return pair_summary(corpus)

    def summary_text(self, summary: dict, code: Callable[[str], str]) -> str:
        target = summary.get("target_split", "test")
        return f"{summary.get('rows_train', '?')} train rows, {summary.get('rows_test', '?')} {target} rows"

    def texts(self, corpus: PairCorpus) -> list[str]:
        return corpus.train.text1 + corpus.train.text2 + corpus.test.text1 + corpus.test.text2

    def target_texts(self, corpus: PairCorpus) -> list[str]:
        return corpus.test.text1 + corpus.test.text2

    def evaluate(self, corpus: PairCorpus, scorer) -> dict:
        return scorer.sts(corpus)

    def as_lists(self, corpus: PairCorpus, scorer, size: int, max_lists: int, seed: int, progress=None) -> ListCorpus:
        return nli_lists(corpus, seed)

    def train_pairs(self, corpus: PairCorpus) -> PairSplit:
        return corpus.train

    def export_texts(self, corpus: PairCorpus, scorer) -> tuple[list[list[str]], dict[str, list]]:
        texts = scorer.pair_texts(corpus)  # the target texts, as the evaluation encodes them (unscored pairs too)
        return [texts], {"split": [corpus.target_split] * len(texts)}

    def evaluation_texts(self, corpus: PairCorpus, scorer) -> list[list[str]]:
        return [scorer.pair_texts(corpus)] if corpus.columns.score is not None else []


PAIRS = PairKind()
