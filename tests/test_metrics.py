"""P@k / S@k and kNN accuracy (docs/definitions.md) checked against direct loops on small random data."""

import numpy as np
import pytest

from core.evaluation.metrics import (
    knn_accuracy,
    knn_predict,
    layerwise_knn_accuracy,
    linear_probe_accuracy,
    polarity_similarity,
    rank_weights,
    sample_pool,
    search,
)


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_rank_weights_sum_to_one_and_decrease():
    for k in (1, 5, 16):
        w = rank_weights(k)
        assert w.sum() == pytest.approx(1.0)
        assert np.all(np.diff(w) < 0) or k == 1
    assert rank_weights(16)[0] == pytest.approx(2 * 16 / (16 * 17))


def test_sample_pool_is_deterministic_and_capped():
    a, b = sample_pool(1000, 50, seed=0), sample_pool(1000, 50, seed=0)
    assert np.array_equal(a, b) and len(a) == 250 and len(set(a)) == 250
    assert len(sample_pool(100, 50)) == 100
    assert not np.array_equal(sample_pool(1000, 50, seed=1), a)


def _loop_ps(mt, mp, rt, rp, tl, pl, k):
    """Direct transcription of the P@k / S@k definition."""
    mt, mp, rt, rp = map(_unit, (mt, mp, rt, rp))
    ps, ss = [], []
    for i in range(len(mt)):
        sims = mp @ mt[i]
        top = np.argsort(-sims)[:k]
        p = s = 0.0
        for rank, j in enumerate(top, start=1):
            w = 2 * (k + 1 - rank) / (k * (k + 1))
            p += w * (pl[j] == tl[i])
            s += w * float(rp[j] @ rt[i])
        ps.append(p)
        ss.append(s)
    return np.mean(ps) * 100, np.std(ps) * 100, np.mean(ss) * 100, np.std(ss) * 100


def test_polarity_similarity_matches_definition_multiclass():
    rng = np.random.default_rng(0)
    mt, mp = rng.normal(size=(30, 8)), rng.normal(size=(120, 8))
    rt, rp = rng.normal(size=(30, 6)), rng.normal(size=(120, 6))
    tl, pl = rng.integers(0, 3, 30), rng.integers(0, 3, 120)
    got = polarity_similarity(mt, mp, rt, rp, tl, pl, k=7)
    want = _loop_ps(mt, mp, rt, rp, tl, pl, 7)
    assert (got.polarity, got.polarity_sd, got.similarity, got.similarity_sd) == pytest.approx(want, rel=1e-5)
    assert got.n_queries == 30 and got.n_pool == 120 and got.k == 7


def test_polarity_is_100_when_labels_are_separated():
    rng = np.random.default_rng(1)
    centres = np.eye(4)[:2] * 10
    pl = np.repeat([0, 1], 50)
    mp = centres[pl] + rng.normal(size=(100, 4)) * 0.1
    tl = np.array([0, 1, 0, 1])
    mt = centres[tl] + rng.normal(size=(4, 4)) * 0.1
    got = polarity_similarity(mt, mp, mt, mp, tl, pl, k=16)
    assert got.polarity == pytest.approx(100.0)
    # reference == model and tight clusters: retrieved texts are near-identical under R
    assert got.similarity > 95


def test_knn_accuracy_matches_loop_and_metric_option():
    rng = np.random.default_rng(2)
    tr, te = rng.normal(size=(200, 5)), rng.normal(size=(40, 5))
    ytr = (tr[:, 0] > 0).astype(int)
    yte = (te[:, 0] > 0).astype(int)
    pred = knn_predict(tr, ytr, te, k=5)
    for i in range(len(te)):
        d = ((tr - te[i]) ** 2).sum(1)
        votes = np.bincount(ytr[np.argsort(d)[:5]], minlength=2)
        assert pred[i] == votes.argmax()
    acc = knn_accuracy(tr, ytr, te, yte, k=5)
    assert acc >= 0.75
    # scaling a training point changes Euclidean neighbours but not cosine ones
    _, idx_c = search(te, tr * rng.uniform(0.1, 10, size=(200, 1)), 3, "cosine")
    _, idx_c0 = search(te, tr, 3, "cosine")
    assert np.array_equal(idx_c, idx_c0)


def test_knn_tie_goes_to_nearer_class():
    tr = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([1, 0, 0, 1])
    # neighbours of -0.1 with k=4: labels 1,0,0,1 -> tie 2:2, nearest is class 1
    assert knn_predict(tr, y, np.array([[-0.1]]), k=4)[0] == 1


def test_layerwise_and_linear_probe():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    noise = rng.normal(size=(3, 300, 4))
    layers = noise.copy()
    layers[2, :, 0] += y * 6  # only the last layer carries the label
    train, test = layers[:, :250], layers[:, 250:]
    accs = layerwise_knn_accuracy(train, y[:250], test, y[250:], k=10)
    assert len(accs) == 3 and accs[2] > 0.9 and accs[0] < 0.75
    assert linear_probe_accuracy(train[2], y[:250], test[2], y[250:]) > 0.9
