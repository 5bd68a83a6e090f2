"""Crop augmentation for self-supervised fine-tuning (docs/definitions.md, Crop augmentation; seed 002).

A document is split into sentences on '.', sentences shorter than ``min_chars`` or longer than
``max_chars`` are dropped, and chunks are formed from t consecutive KEPT sentences: dropping
comes first in the definition, so a dropped sentence between two kept ones does not break a
chunk. Two different chunks of one document form an (anchor, positive) pair, trained with
in-batch negatives (MultipleNegativesRankingLoss, scale 20 = temperature 0.05). The SimCSE
baseline pairs one chunk with itself and relies on dropout to make the two views differ.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

import datasets

from core.data.corpus import TEXT_NAMES
from core.data.table import DEFAULT_MAX_BYTES, clean_texts, guess_text_column, known_columns, read_file, resolve_column
from core.errors import UserError

_SENTENCE = re.compile(r"[^.]+\.?")


@dataclass
class CropPairs:
    """Training pairs plus where they came from; ``doc_index[i]`` is the document of pair i."""

    anchors: list[str]
    positives: list[str]
    doc_index: list[int]
    skipped_docs: int
    n_docs: int


def split_sentences(doc: str, min_chars: int = 100, max_chars: int = 250) -> list[str]:
    """Sentences of ``doc`` split on '.', stripped, each keeping its '.', of min..max chars (inclusive).

    The length is that of the returned sentence, '.' included. A '.' inside a number or an
    abbreviation also splits, as the definition says.
    """
    sentences = (piece.strip() for piece in _SENTENCE.findall(doc))
    return [s for s in sentences if min_chars <= len(s) <= max_chars]


def chunks(sentences: list[str], t: int = 2) -> list[str]:
    """All windows of ``t`` consecutive sentences, joined by a space (len - t + 1 of them)."""
    if t < 1:
        raise UserError(f"Chunk size t must be at least 1 sentence, got {t}.")
    return [" ".join(sentences[i : i + t]) for i in range(len(sentences) - t + 1)]


def _doc_chunks(doc: str, t: int, min_chars: int, max_chars: int) -> list[str]:
    """Distinct chunks of one document, in order; distinct so that a pair never has equal texts."""
    return list(dict.fromkeys(chunks(split_sentences(doc, min_chars, max_chars), t)))


def _check_pairs_per_doc(pairs_per_doc: int) -> None:
    if pairs_per_doc < 1:
        raise UserError(f"Pairs per document must be at least 1, got {pairs_per_doc}.")


def crop_pairs(
    docs: list[str],
    t: int = 2,
    seed: int = 0,
    pairs_per_doc: int = 1,
    min_chars: int = 100,
    max_chars: int = 250,
) -> CropPairs:
    """Up to ``pairs_per_doc`` distinct (anchor, positive) pairs of different chunks per document.

    Documents with fewer than 2 distinct chunks are skipped and counted. Deterministic for a seed.
    With several pairs per document, pairs of one document may meet in a batch as false negatives.
    """
    _check_pairs_per_doc(pairs_per_doc)
    rng = random.Random(seed)
    pairs = CropPairs([], [], [], skipped_docs=0, n_docs=len(docs))
    for index, doc in enumerate(docs):
        doc_chunks = _doc_chunks(doc, t, min_chars, max_chars)
        n = len(doc_chunks)
        if n < 2:
            pairs.skipped_docs += 1
            continue
        # Ordered pairs (a, p), a != p, numbered 0 .. n(n-1)-1, sampled without replacement.
        for k in rng.sample(range(n * (n - 1)), min(pairs_per_doc, n * (n - 1))):
            a, r = divmod(k, n - 1)
            pairs.anchors.append(doc_chunks[a])
            pairs.positives.append(doc_chunks[r if r < a else r + 1])
            pairs.doc_index.append(index)
    return pairs


def dropout_pairs(
    docs: list[str],
    t: int = 2,
    seed: int = 0,
    pairs_per_doc: int = 1,
    min_chars: int = 100,
    max_chars: int = 250,
) -> CropPairs:
    """SimCSE baseline: up to ``pairs_per_doc`` distinct chunks per document, each as anchor == positive.

    Only documents with no chunk at all are skipped, since one chunk is enough. Deterministic for a seed.
    """
    _check_pairs_per_doc(pairs_per_doc)
    rng = random.Random(seed)
    pairs = CropPairs([], [], [], skipped_docs=0, n_docs=len(docs))
    for index, doc in enumerate(docs):
        doc_chunks = _doc_chunks(doc, t, min_chars, max_chars)
        if not doc_chunks:
            pairs.skipped_docs += 1
            continue
        for chunk in rng.sample(doc_chunks, min(pairs_per_doc, len(doc_chunks))):
            pairs.anchors.append(chunk)
            pairs.positives.append(chunk)
            pairs.doc_index.append(index)
    return pairs


def to_dataset(pairs: CropPairs) -> datasets.Dataset:
    """A Dataset with exactly the columns anchor, positive (the trainer feeds every column to the loss)."""
    if not pairs.anchors:
        raise UserError(
            f"None of the {pairs.n_docs} documents gave a training pair: each needs enough sentences "
            "(split on '.') within the length limits (default 100-250 characters) to form two chunks. "
            "Use longer documents, a smaller t or wider limits."
        )
    return datasets.Dataset.from_dict({"anchor": pairs.anchors, "positive": pairs.positives})


def load_documents(path: str | Path, text_col: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
    """Just the non-empty texts of a file, in order: crop augmentation needs documents, not labels."""
    path = Path(path)
    df, _ = read_file(path, max_bytes)
    names = [str(c) for c in df.columns]
    col = (resolve_column(names, text_col, "text") if text_col
           else next(iter(known_columns(names, TEXT_NAMES, set())), None) or guess_text_column(df, set()))
    if col is None:
        raise UserError(f"Could not tell which column of {path.name} holds the documents "
                        f"(columns: {', '.join(names)}); pass --text-col NAME.")
    texts = [t for t in clean_texts(df[col], col).tolist() if isinstance(t, str) and t]
    if not texts:
        raise UserError(f"Column '{col}' of {path.name} has no texts.")
    return texts
