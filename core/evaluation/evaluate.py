"""Evaluate a model on a corpus: which texts to encode, encoding with the cache, and scoring (the same scoring
runs during training through core.evaluation.evaluator)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from core.data.corpus import Corpus
from core.errors import UserError
from core.evaluation.metrics import (
    knn_vote,
    layerwise_knn_accuracy,
    linear_cka,
    linear_probe_accuracy,
    polarity_similarity,
    sample_pool,
)
from core.evaluation.items import ITEMS, NEIGHBOURS
from core.evaluation.per_class import per_class
from core.evaluation.uncertainty import json_interval, proportion_ci, target_intervals
from core.models.encode import encode_cached
from core.models.loading import layer_dims, model_fingerprint
from core.storage import embeddings_entry

# phase label, done, total: one callback drives a tqdm bar in the CLI and st.progress in the app.
PhaseProgress = Callable[[str, int, int], None]
# An evaluation records every layer's mean-pooled state beside the embedding (for the Layers page and CKA) while
# that entry stays under this size: about 90k texts of a 6-layer, 384-wide model.
LAYER_CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class EvalSettings:
    k: int = 16  # P@k / S@k retrieval depth
    discount: str = "linear"  # P@k / S@k rank weighting (core.evaluation.headline.DISCOUNTS)
    knn_k: int = 10
    knn_metric: str = "euclidean"  # the model's own embedding, as it produces it
    layer_metric: str = "cosine"  # each layer's mean-pooled hidden state (docs/definitions.md, Layer-wise kNN)
    pool_factor: int = 5
    seed: int = 0
    # kNN reference set: the whole train split up to this size, else a seeded sample; 0: no kNN or linear-probe
    # accuracy, only P@k and S@k (a trade-off-only evaluation encodes the source pool, not the reference set too)
    knn_train_max: int = 10000
    linear_probe: bool = True


@dataclass(frozen=True)
class EvalSets:
    """Row indices into the corpus train split: the P/S source pool and the kNN reference set, and the train
    sample they make up, which is encoded once (and mined from, so mining reuses its cached encoding)."""

    pool: np.ndarray
    knn: np.ndarray  # empty in a trade-off-only evaluation
    train_rows: np.ndarray  # union of both
    train_texts: list[str]  # the texts of train_rows
    train_labels: np.ndarray  # their label codes
    key: str  # names this sample of this corpus in cache keys
    whole: EvalSets | None = None  # a trade-off-only sample's whole sample, whose cached embeddings hold its rows

    @property
    def pool_pos(self) -> np.ndarray:
        return np.searchsorted(self.train_rows, self.pool)

    @property
    def knn_pos(self) -> np.ndarray:
        return np.searchsorted(self.train_rows, self.knn)


def eval_sets(corpus: Corpus, settings: EvalSettings) -> EvalSets:
    n_train = len(corpus.train_texts)
    pool = sample_pool(n_train, len(corpus.test_texts), settings.pool_factor, settings.seed)
    whole = None
    if settings.knn_train_max == 0:
        knn = np.arange(0)
        whole = eval_sets(corpus, replace(settings, knn_train_max=EvalSettings.knn_train_max))
    elif n_train <= settings.knn_train_max:
        knn = np.arange(n_train)
    else:
        knn = np.sort(np.random.default_rng(settings.seed).choice(n_train, settings.knn_train_max, replace=False))
    rows = np.union1d(pool, knn)
    return EvalSets(pool=pool, knn=knn, train_rows=rows, train_texts=[corpus.train_texts[i] for i in rows],
                    train_labels=corpus.train_labels[rows], key=f"{corpus.fingerprint}-{len(rows)}", whole=whole)


def score(
    corpus: Corpus,
    sets: EvalSets,
    settings: EvalSettings,
    model_train: np.ndarray,
    model_test: np.ndarray,
    ref_train: np.ndarray,
    ref_test: np.ndarray,
) -> dict:
    """All headline metrics from embeddings of `sets.train_rows` and of the test split, under "per_class" the
    per-class figures (core.evaluation.per_class) from the same retrieval and kNN votes, under "uncertainty" the
    standard errors and bootstrap CIs of P and S (core.evaluation.uncertainty), and under ITEMS each test text's
    arrays (core.evaluation.items), which evaluate_corpus stores apart: the rest is JSON-ready."""
    train_labels = sets.train_labels
    ps = polarity_similarity(
        model_test,
        model_train[sets.pool_pos],
        ref_test,
        ref_train[sets.pool_pos],
        corpus.test_labels,
        train_labels[sets.pool_pos],
        k=settings.k,
        discount=settings.discount,
    )
    out = ps.as_dict()
    out["uncertainty"] = target_intervals(ps.target_polarity, ps.target_similarity)
    out[ITEMS] = {"polarity": ps.target_polarity, "similarity": ps.target_similarity}
    out["n_knn_train"] = len(sets.knn)
    if not len(sets.knn):  # trade-off only
        return out
    knn_x, knn_y = model_train[sets.knn_pos], train_labels[sets.knn_pos]
    predicted, neighbours = knn_vote(knn_x, knn_y, model_test, settings.knn_k, settings.knn_metric)
    out["knn_accuracy"] = float((predicted == corpus.test_labels).mean())  # as metrics.knn_accuracy
    out[ITEMS].update(knn_pred=predicted, knn_label=np.asarray(corpus.test_labels),
                      knn_neighbours=sets.knn[neighbours[:, :NEIGHBOURS]].astype(np.int32))
    if settings.linear_probe:
        out["linear_accuracy"] = linear_probe_accuracy(knn_x, knn_y, model_test, corpus.test_labels, settings.seed)
    names = np.asarray(corpus.classes, dtype=object)
    out["per_class"] = per_class(names[corpus.test_labels], names[predicted], ps.target_polarity, corpus.classes, ps.k,
                                 settings.knn_k)
    return out


def layers_fit(model, n_texts: int) -> bool:
    """Whether the per-layer states of `n_texts` texts fit LAYER_CACHE_BYTES (float32, embeddings + each layer)."""
    layers, hidden = layer_dims(model)
    return bool(layers and hidden) and (layers + 1) * n_texts * hidden * 4 <= LAYER_CACHE_BYTES


def _encode_split(model, texts: list[str], label: str, progress: PhaseProgress | None, fingerprint: str,
                  layers: bool) -> np.ndarray:
    """The pooled embeddings of `texts`. With `layers`, a miss's pass also records every layer's state (when they
    fit), so the Layers page and CKA later read this pass instead of encoding the texts again."""
    return encode_cached(model, texts, record_layers=layers and layers_fit(model, len(texts)), fingerprint=fingerprint,
                         progress=(lambda d, t: progress(label, d, t)) if progress else None)


def encode_for_eval(
    model, corpus: Corpus, sets: EvalSets, name: str, progress: PhaseProgress | None = None, layers: bool = True,
    shared: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The model's embeddings of the train sample and the test texts, read from or written to the cache; `layers`:
    record the per-layer states in the same pass (off where a pass cannot give them cheaply: top-layer runs).

    A trade-off-only sample (sets.whole set) is cut from the model's embeddings of the whole sample where they are
    cached, and for a `shared` model (the reference, whose embeddings of the whole sample mining, the Corpus page and
    every other run read) encoded whole if they are not: so no model encodes a text twice. A fine-tuned model's
    encodes the pool alone."""
    fp = model_fingerprint(model)
    label = f"{name}: encoding train sample"
    whole_entry = embeddings_entry(fp, sets.whole.train_texts, "pooled") if sets.whole is not None else None
    if whole_entry is not None and (shared or whole_entry.exists()):  # read once, by encode_cached
        whole = _encode_split(model, sets.whole.train_texts, label, progress, fp, layers)
        train = whole[np.searchsorted(sets.whole.train_rows, sets.train_rows)]
    else:
        train = _encode_split(model, sets.train_texts, label, progress, fp, layers)
    test = _encode_split(model, corpus.test_texts, f"{name}: encoding {corpus.target_split}", progress, fp, layers)
    return train, test


def evaluate(
    model,
    reference,
    corpus: Corpus,
    settings: EvalSettings = EvalSettings(),
    progress: PhaseProgress | None = None,
    model_name: str | None = None,
    layers: bool = True,
) -> dict:
    """Headline metrics of `model`, with S@k judged by `reference` (the same object for a reference run); `layers`:
    as in encode_for_eval."""
    sets = eval_sets(corpus, settings)
    m_train, m_test = encode_for_eval(model, corpus, sets, "model", progress, layers, shared=reference is model)
    if reference is model:
        r_train, r_test = m_train, m_test
    else:
        r_train, r_test = encode_for_eval(reference, corpus, sets, "reference", progress, layers, shared=True)
    out = score(corpus, sets, settings, m_train, m_test, r_train, r_test)
    out["model"] = model_name or getattr(model, "contrastlab_source", "model")
    return out


def layer_states(
    model, corpus: Corpus, settings: EvalSettings = EvalSettings(), progress: PhaseProgress | None = None,
    name: str = "layers",
) -> tuple[np.ndarray, np.ndarray]:
    """Every layer's mean-pooled hidden states (L+1, n, h) of the kNN train sample and of the test texts, from one
    cached forward pass per batch: the states an evaluation of this model recorded (its whole train sample, sliced
    to the kNN rows), or, where they would not fit the cache, those of the kNN rows alone."""
    sets = eval_sets(corpus, settings)
    fp = model_fingerprint(model)

    def states(texts: list[str], label: str) -> np.ndarray:
        return encode_cached(model, texts, layers=True, fingerprint=fp,
                             progress=(lambda d, t: progress(f"{name}: encoding {label}", d, t)) if progress else None)

    if layers_fit(model, len(sets.train_texts)):
        train = states(sets.train_texts, "train sample")[:, sets.knn_pos]
    else:
        train = states([corpus.train_texts[i] for i in sets.knn], "train")
    return train, states(corpus.test_texts, corpus.target_split)


def _layer_knn(states: tuple[np.ndarray, np.ndarray], corpus: Corpus, settings: EvalSettings) -> list[float]:
    train, test = states
    knn = eval_sets(corpus, settings).knn
    return layerwise_knn_accuracy(train, corpus.train_labels[knn], test, corpus.test_labels, settings.knn_k,
                                  settings.layer_metric)


def _layer_cka(ref: tuple[np.ndarray, np.ndarray], new: tuple[np.ndarray, np.ndarray]) -> list[float]:
    ref_all, new_all = np.concatenate(ref, axis=1), np.concatenate(new, axis=1)
    if ref_all.shape[0] != new_all.shape[0]:
        raise UserError(f"the models have {ref_all.shape[0] - 1} and {new_all.shape[0] - 1} layers; CKA compares "
                        "layers of one architecture")
    return [linear_cka(a, b) for a, b in zip(ref_all, new_all)]


def evaluate_layers(
    model, corpus: Corpus, settings: EvalSettings = EvalSettings(), progress: PhaseProgress | None = None
) -> list[dict]:
    """kNN accuracy of every layer's mean-pooled hidden state (0 = embeddings), from one pass per batch, with its
    95% interval over the test texts (Wilson)."""
    accs = _layer_knn(layer_states(model, corpus, settings, progress), corpus, settings)
    n = len(corpus.test_texts)
    return [{"layer": i, "knn_accuracy": a, "knn_accuracy_ci": json_interval(proportion_ci(a, n))}
            for i, a in enumerate(accs)]


def layer_cka(reference, tuned, corpus: Corpus, settings: EvalSettings = EvalSettings(),
              progress: PhaseProgress | None = None) -> list[float]:
    """Linear CKA per layer between two models' mean-pooled hidden states of the same texts (the kNN train sample
    and the test texts): 1.0 = the layer did not change. The states are the ones the kNN curves use."""
    return _layer_cka(layer_states(reference, corpus, settings, progress, "reference"),
                      layer_states(tuned, corpus, settings, progress, "fine-tuned"))


def compare_layers(reference, tuned, corpus: Corpus, settings: EvalSettings = EvalSettings(),
                   progress: PhaseProgress | None = None) -> list[dict]:
    """Per layer: the reference's and the fine-tuned model's kNN accuracy and their linear CKA, each model's
    states read once."""
    ref = layer_states(reference, corpus, settings, progress, "reference")
    new = layer_states(tuned, corpus, settings, progress, "fine-tuned")
    n = len(corpus.test_texts)
    return [{"layer": i, "knn_accuracy": b, "knn_accuracy_ci": json_interval(proportion_ci(b, n)),
             "knn_accuracy_tuned": a, "knn_accuracy_tuned_ci": json_interval(proportion_ci(a, n)), "cka": c}
            for i, (b, a, c) in enumerate(zip(_layer_knn(ref, corpus, settings), _layer_knn(new, corpus, settings),
                                              _layer_cka(ref, new), strict=True))]
