"""Crop augmentation (docs/definitions.md): sentence filter, chunks, pair sampling, SimCSE baseline."""

import csv
from pathlib import Path

import pytest

from core.data.crops import CropPairs, chunks, crop_pairs, dropout_pairs, split_sentences, to_dataset
from core.errors import UserError

BBC = Path(__file__).resolve().parents[2] / "shared" / "data" / "bbc_news.csv"


def sentence(tag: str, length: int = 120) -> str:
    """A sentence of exactly ``length`` characters, '.' included, starting with ``tag``."""
    return (f"{tag} " + "w" * length)[: length - 1] + "."


def doc(*tags: str, length: int = 120) -> str:
    return " ".join(sentence(tag, length) for tag in tags)


def test_sentence_helper_is_exact():
    assert len(sentence("a", 100)) == 100 and len(sentence("b", 250)) == 250


def test_split_keeps_period_and_drops_out_of_range_lengths():
    text = " ".join([sentence("keep1", 100), sentence("short", 99), sentence("keep2", 250), sentence("long", 251)])
    kept = split_sentences(text)
    assert [s.split()[0] for s in kept] == ["keep1", "keep2"]
    assert all(s.endswith(".") and 100 <= len(s) <= 250 for s in kept)


def test_split_strips_and_keeps_a_trailing_sentence_without_period():
    tail = sentence("tail", 121)[:-1]  # 120 chars, no final '.'
    assert split_sentences("   " + sentence("one") + "\n  " + tail + "  ") == [sentence("one"), tail]


def test_split_honours_custom_limits():
    kept = split_sentences("Tiny one. Another short one. Far too long for the limit.", min_chars=5, max_chars=20)
    assert kept == ["Tiny one.", "Another short one."]


def test_chunks_are_windows_of_consecutive_kept_sentences():
    s = ["A.", "B.", "C.", "D."]
    assert chunks(s, t=2) == ["A. B.", "B. C.", "C. D."]
    assert chunks(s, t=3) == ["A. B. C.", "B. C. D."]
    assert chunks(s, t=1) == s
    assert chunks(s[:1], t=2) == []
    with pytest.raises(UserError):
        chunks(s, t=0)


def test_a_dropped_sentence_does_not_break_a_chunk():
    text = " ".join([sentence("first"), "Short.", sentence("second")])
    assert chunks(split_sentences(text)) == [f"{sentence('first')} {sentence('second')}"]


def test_crop_pairs_are_different_chunks_of_the_same_doc():
    docs = [doc("a1", "a2", "a3", "a4"), doc("b1", "b2", "b3"), doc("c1", "c2", "c3", "c4", "c5")]
    pairs = crop_pairs(docs, seed=3, pairs_per_doc=2)
    assert pairs.doc_index == [0, 0, 1, 1, 2, 2]
    assert len(pairs.anchors) == len(pairs.positives) == 6
    for anchor, positive, i in zip(pairs.anchors, pairs.positives, pairs.doc_index):
        assert anchor != positive
        own = chunks(split_sentences(docs[i]))
        assert anchor in own and positive in own
    assert len(set(zip(pairs.anchors, pairs.positives))) == 6  # no repeated pair within a doc


def test_docs_with_fewer_than_two_chunks_are_skipped_and_counted():
    docs = [doc("a1", "a2", "a3"), doc("one", "two"), "", "Too short. All of it.", doc("b1", "b2", "b3")]
    pairs = crop_pairs(docs)
    assert (pairs.n_docs, pairs.skipped_docs) == (5, 3)
    assert pairs.doc_index == [0, 4]


def test_repeated_sentences_never_make_a_pair_of_equal_texts():
    pairs = crop_pairs([doc("same", "same", "same", "same"), doc("x", "x", "y")])
    assert pairs.skipped_docs == 1  # the first doc has a single distinct chunk
    assert all(a != p for a, p in zip(pairs.anchors, pairs.positives))


def test_pairs_per_doc_is_capped_by_the_possible_ordered_pairs():
    first, second = chunks(split_sentences(doc("a", "b", "c")))
    pairs = crop_pairs([doc("a", "b", "c")], pairs_per_doc=50)  # 2 chunks -> 2 ordered pairs
    assert sorted(zip(pairs.anchors, pairs.positives)) == sorted([(first, second), (second, first)])
    with pytest.raises(UserError):
        crop_pairs([doc("a", "b", "c")], pairs_per_doc=0)


def test_sampling_is_deterministic_for_a_seed():
    docs = [doc(*[f"d{d}s{s}" for s in range(8)]) for d in range(20)]
    assert crop_pairs(docs, seed=7) == crop_pairs(docs, seed=7)
    assert dropout_pairs(docs, seed=7) == dropout_pairs(docs, seed=7)
    assert crop_pairs(docs, seed=7).anchors != crop_pairs(docs, seed=8).anchors


def test_dropout_pairs_use_one_chunk_twice():
    docs = [doc("a1", "a2", "a3"), doc("one", "two"), "nothing here."]
    pairs = dropout_pairs(docs, pairs_per_doc=2)
    assert pairs.anchors == pairs.positives
    assert pairs.doc_index == [0, 0, 1]
    assert pairs.skipped_docs == 1
    assert set(pairs.anchors[:2]) == set(chunks(split_sentences(docs[0])))


def test_to_dataset_has_exactly_anchor_and_positive():
    pairs = crop_pairs([doc("a1", "a2", "a3")])
    dataset = to_dataset(pairs)
    assert dataset.column_names == ["anchor", "positive"]
    assert dataset[0] == {"anchor": pairs.anchors[0], "positive": pairs.positives[0]}
    with pytest.raises(UserError, match="None of the 2 documents"):
        to_dataset(CropPairs([], [], [], skipped_docs=2, n_docs=2))


def test_bbc_news_most_documents_yield_pairs():
    if not BBC.exists():
        pytest.skip(f"{BBC} is not available")
    with BBC.open(encoding="utf-8", newline="") as fh:
        docs = [row["text"] for row in csv.DictReader(fh)]
    pairs = crop_pairs(docs)
    assert pairs.n_docs == len(docs) == 2125
    assert len(pairs.anchors) == pairs.n_docs - pairs.skipped_docs > 0.95 * len(docs)
    for anchor, positive in zip(pairs.anchors, pairs.positives):
        assert anchor != positive
        # a t = 2 chunk is two kept sentences joined by a space
        assert 2 * 100 + 1 <= len(anchor) <= 2 * 250 + 1 and 2 * 100 + 1 <= len(positive) <= 2 * 250 + 1
