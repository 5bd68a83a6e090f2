"""Mining (seed 000): threshold and labels honoured, formats, dedupe, determinism, active share."""

import numpy as np
import pytest

from core.data.mining import MiningSettings, active_share, build_examples, mine_neighbours
from core.errors import UserError


def _toy(n_per=30, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, dim))
    labels = np.repeat([0, 1, 2], n_per)
    emb = centres[labels] + rng.normal(size=(len(labels), dim)) * 0.8
    texts = [f"text {i}" for i in range(len(labels))]
    return emb, labels, texts


def _cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_neighbours_respect_labels_threshold_and_self():
    emb, labels, texts = _toy()
    s = MiningSettings(k=4, threshold=0.3)
    nb = mine_neighbours(emb, labels, texts, s)
    for a in range(len(labels)):
        assert len(nb.positives[a]) <= 4 and len(nb.negatives[a]) <= 4
        for p in nb.positives[a]:
            assert p != a and labels[p] == labels[a] and _cos(emb[a], emb[p]) >= 0.3 - 1e-6
        for q in nb.negatives[a]:
            assert labels[q] != labels[a] and _cos(emb[a], emb[q]) >= 0.3 - 1e-6
        # nearest first
        sims = [_cos(emb[a], emb[p]) for p in nb.positives[a]]
        assert sims == sorted(sims, reverse=True)


def test_threshold_really_filters_and_is_counted():
    emb, labels, texts = _toy()
    loose = mine_neighbours(emb, labels, texts, MiningSettings(k=4, threshold=-1.0))
    strict = mine_neighbours(emb, labels, texts, MiningSettings(k=4, threshold=0.8))
    assert loose.stats["anchors_removed_by_threshold"] == 0
    assert strict.stats["anchors_removed_by_threshold"] > 0
    assert sum(map(len, strict.negatives)) < sum(map(len, loose.negatives))


def test_duplicate_texts_are_not_positives():
    emb, labels, texts = _toy()
    texts[1] = texts[0]
    emb[1] = emb[0]
    nb = mine_neighbours(emb, labels, texts, MiningSettings(k=4, threshold=-1))
    assert 1 not in nb.positives[0] and 0 not in nb.positives[1]


@pytest.mark.parametrize("fmt,cols", [
    ("triplet", ["anchor", "positive", "negative"]),
    ("contrastive", ["sentence1", "sentence2", "label"]),
    ("mnrl", ["anchor", "positive"]),
    ("cosine", ["sentence1", "sentence2", "score"]),
])
def test_formats_are_labelled_correctly_and_deterministic(fmt, cols):
    emb, labels, texts = _toy()
    s = MiningSettings(k=3, threshold=0.0, max_examples=50, seed=1)
    nb = mine_neighbours(emb, labels, texts, s)
    ex = build_examples(fmt, texts, nb, s)
    assert list(ex.frame.columns) == cols and len(ex) == 50
    label_of = dict(zip(texts, labels))
    for row in ex.frame.itertuples(index=False):
        if fmt == "triplet":
            assert label_of[row.anchor] == label_of[row.positive] != label_of[row.negative]
        elif fmt == "mnrl":
            assert label_of[row.anchor] == label_of[row.positive]
        else:
            target = row.label if fmt == "contrastive" else row.score
            assert (label_of[row.sentence1] == label_of[row.sentence2]) == (target == 1)
    again = build_examples(fmt, texts, nb, s)
    assert ex.frame.equals(again.frame)
    assert ex.frame.duplicated().sum() == 0


def test_no_examples_is_a_user_error():
    emb, labels, texts = _toy()
    s = MiningSettings(k=3, threshold=0.999)
    with pytest.raises(UserError, match="lower the threshold"):
        build_examples("triplet", texts, mine_neighbours(emb, labels, texts, s), s)


def test_active_share_falls_with_smaller_margin():
    rng = np.random.default_rng(0)
    a, p, n = (rng.normal(size=(200, 4)) for _ in range(3))
    shares = [active_share(a, p, n, m) for m in (0.0, 0.1, 1.0, 2.0)]
    assert shares == sorted(shares) and shares[-1] == 1.0  # cosine distances lie in [0, 2]
    assert 0 < shares[0] < 1
