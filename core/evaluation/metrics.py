"""Metrics on embeddings: P@k / S@k retrieval trade-off, kNN and linear-probe accuracy (docs/definitions.md,
"P@k and S@k", "kNN accuracy", "Layer-wise kNN"), and linear CKA between two models' layers.

Pure numpy + FAISS; nothing here runs a model, so every function is cheap to test.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import faiss
import numpy as np

from core.evaluation.headline import DISCOUNTS


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _normalise(x: np.ndarray) -> np.ndarray:
    x = _f32(x)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.clip(norms, 1e-12, None)


def search(queries: np.ndarray, base: np.ndarray, k: int, metric: str = "cosine") -> tuple[np.ndarray, np.ndarray]:
    """Exact k-nearest-neighbour search with FAISS: (scores, indices), best first.

    cosine: inner product of L2-normalised vectors (higher is closer); euclidean: squared L2 (lower is closer).
    """
    if metric not in ("cosine", "euclidean"):
        raise ValueError(f"unknown metric {metric!r}")
    k = min(k, len(base))
    if metric == "cosine":
        q, b = _normalise(queries), _normalise(base)
        index = faiss.IndexFlatIP(b.shape[1])
    else:
        q, b = _f32(queries), _f32(base)
        index = faiss.IndexFlatL2(b.shape[1])
    index.add(b)
    return index.search(q, k)


def rank_weights(k: int, discount: str = "linear") -> np.ndarray:
    """The weights of ranks i = 1..k, summing to 1: the linear discount w_i = 2(k+1-i) / (k(k+1)), or uniform 1/k
    with discount "none"."""
    if discount not in DISCOUNTS:
        raise ValueError(f"unknown discount {discount!r}")
    if discount == "none":
        return np.full(k, 1.0 / k)
    i = np.arange(1, k + 1, dtype=np.float64)
    return 2.0 * (k + 1 - i) / (k * (k + 1))


def sample_pool(n_train: int, n_targets: int, factor: int = 5, seed: int = 0) -> np.ndarray:
    """Indices of the source pool: factor x the target count sampled from train, capped at the train size."""
    size = min(factor * n_targets, n_train)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_train, size=size, replace=False))


@dataclass
class TradeoffScore:
    polarity: float
    polarity_sd: float
    similarity: float
    similarity_sd: float
    k: int
    discount: str  # the rank weighting that produced the figures (DISCOUNTS)
    n_queries: int
    n_pool: int
    # P and S of each target in [0, 1], for per-class results (core.evaluation.per_class) and the intervals of the
    # means (core.evaluation.uncertainty); not headline figures
    target_polarity: np.ndarray = field(repr=False, compare=False)
    target_similarity: np.ndarray = field(repr=False, compare=False)

    def as_dict(self) -> dict:
        """The headline figures (JSON-ready); the per-target arrays stay out."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("target_")}


def polarity_similarity(
    model_targets: np.ndarray,
    model_pool: np.ndarray,
    ref_targets: np.ndarray,
    ref_pool: np.ndarray,
    target_labels: np.ndarray,
    pool_labels: np.ndarray,
    k: int = 16,
    discount: str = "linear",
) -> TradeoffScore:
    """P@k and S@k (docs/definitions.md, P@k and S@k), x100, with standard deviations over targets; the neighbours
    weighted by `discount` (rank_weights).

    Model M retrieves by cosine; S scores what it retrieved with the frozen reference R's cosine, so a
    model that separates labels by forgetting meaning loses S while gaining P.
    """
    k = min(k, len(model_pool))
    _, idx = search(model_targets, model_pool, k, "cosine")
    w = rank_weights(k, discount)
    same = (np.asarray(pool_labels)[idx] == np.asarray(target_labels)[:, None]).astype(np.float64)
    p = same @ w
    rt, rp = _normalise(ref_targets), _normalise(ref_pool)
    cos_r = np.einsum("nd,nkd->nk", rt, rp[idx]).astype(np.float64)
    s = cos_r @ w
    return TradeoffScore(
        polarity=float(p.mean() * 100),
        polarity_sd=float(p.std() * 100),
        similarity=float(s.mean() * 100),
        similarity_sd=float(s.std() * 100),
        k=k,
        discount=discount,
        n_queries=len(p),
        n_pool=len(model_pool),
        target_polarity=p,
        target_similarity=s,
    )


def knn_vote(
    train: np.ndarray, train_labels: np.ndarray, test: np.ndarray, k: int = 10, metric: str = "euclidean"
) -> tuple[np.ndarray, np.ndarray]:
    """Majority vote of the k nearest training points (a tie goes to the tied class with the nearest vote), and
    the neighbours' row indices into `train`, nearest first."""
    _, idx = search(test, train, k, metric)
    labels = np.asarray(train_labels)[idx]  # (n, k)
    n_classes = int(np.max(train_labels)) + 1
    k_eff = idx.shape[1]
    # 1 per vote plus a geometric bonus by rank (total < 0.002): it orders tied classes by their nearest
    # vote and can never outvote a majority.
    weight = 1.0 + 1e-3 * 0.5 ** np.arange(k_eff)
    votes = np.zeros((len(labels), n_classes))
    np.add.at(votes, (np.arange(len(labels))[:, None], labels), weight)
    return votes.argmax(1), idx


def knn_predict(
    train: np.ndarray, train_labels: np.ndarray, test: np.ndarray, k: int = 10, metric: str = "euclidean"
) -> np.ndarray:
    """The kNN vote's class for each test point (knn_vote)."""
    return knn_vote(train, train_labels, test, k, metric)[0]


def knn_accuracy(
    train: np.ndarray,
    train_labels: np.ndarray,
    test: np.ndarray,
    test_labels: np.ndarray,
    k: int = 10,
    metric: str = "euclidean",
) -> float:
    """kNN classification accuracy (docs/definitions.md, kNN accuracy): Euclidean on raw embeddings by default."""
    pred = knn_predict(train, train_labels, test, k, metric)
    return float((pred == np.asarray(test_labels)).mean())


def layerwise_knn_accuracy(
    train_layers: np.ndarray,
    train_labels: np.ndarray,
    test_layers: np.ndarray,
    test_labels: np.ndarray,
    k: int = 10,
    metric: str = "cosine",
) -> list[float]:
    """kNN accuracy for each layer's mean-pooled hidden state; arrays are (L+1, n, h), 0 = embeddings. Cosine by
    default: raw hidden states have a few very large dimensions that dominate a Euclidean distance."""
    return [
        knn_accuracy(tr, train_labels, te, test_labels, k, metric)
        for tr, te in zip(train_layers, test_layers, strict=True)
    ]


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of two representations of the same n examples (rows): 1.0 = the same up to rotation and
    isotropic scaling, near 0 = unrelated (docs/definitions.md, Which layers changed).

    CKA = ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F) on column-centred X, Y, in float64: the feature-space
    form costs O(n d^2), so every text of a corpus can take part.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape[0] != y.shape[0] or x.shape[0] < 2:
        raise ValueError("CKA needs the same two or more examples in both representations")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return float("nan")
    x = x - x.mean(0)
    y = y - y.mean(0)
    cross = np.linalg.norm(y.T @ x) ** 2
    norms = np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)
    return float(cross / norms) if norms > 0 else float("nan")


def linear_probe_accuracy(
    train: np.ndarray, train_labels: np.ndarray, test: np.ndarray, test_labels: np.ndarray, seed: int = 0
) -> float:
    """Accuracy of a logistic-regression probe: how linearly separable the classes are."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(max_iter=1000, random_state=seed)
    clf.fit(_f32(train), np.asarray(train_labels))
    return float(clf.score(_f32(test), np.asarray(test_labels)))
