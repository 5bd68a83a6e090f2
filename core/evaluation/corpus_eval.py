"""One evaluation for every corpus kind: what a labelled, pair or list corpus is judged by, which texts that
encodes, and the cached result. The trainer (before, after), the CLI, the pages and a sweep's Ray tasks call
`evaluate_corpus`, so no caller branches on the corpus kind, and the reference model's figures on a corpus are
computed once and read by every run that starts from it.

- labelled texts: P@k, S@k, kNN and linear-probe accuracy (core.evaluation.evaluate), the reference judging S@k;
- pairs: STS Spearman on the target pairs (core.evaluation.sts);
- lists: ordering accuracy and Kendall tau on the target lists (core.evaluation.ordering);
- negatives: reranking accuracy on the target rows (core.evaluation.reranking);
plus, for any kind, the STS Spearman of a run's extra pair corpus (`sts`) and the ordering of a list recipe's
target lists (`lists`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict

import numpy as np

from core.data.kinds import kind_of
from core.data.lists import ListCorpus
from core.data.pairs import PairCorpus
from core.evaluation import items as per_item
from core.evaluation.evaluate import EvalSets, EvalSettings, PhaseProgress, eval_sets, evaluate
from core.evaluation.items import CONDITIONS, CONTENT_VERSION, ITEMS, ITEMS_OF, canonical
from core.evaluation.ordering import evaluate_lists, list_texts, ordering_metrics
from core.evaluation.reranking import rerank_metrics
from core.evaluation.sts import evaluate_pairs, pair_texts, sts_scored
from core.evaluation.uncertainty import bootstrap_mean_ci, json_interval, proportion_ci, spearman_ci
from core.models.encode import encode_cached
from core.models.loading import model_fingerprint, source_name
from core.models.rates import EncodeClock, record_rate
from core.storage import cached_json, key_hash, result_entry

# A phase that encodes the distinct texts of pairs or lists counts texts, not pairs (5,001 texts for 4,906 pairs).
TEXTS_OF = "encoding the {}' distinct texts"
RESULT_VERSION = 8  # part of the result cache's key: raise it when what an evaluation returns changes


class Scorer:
    """What a corpus kind builds its evaluation from (core.data.kinds.CorpusKind.evaluate, .evaluation_texts): the
    model, the reference that judges S@k, the settings and the progress, with the evaluations the kinds here are
    judged by. core.data sits below this layer, so a kind is handed these rather than importing them; a new kind
    calls one of them or computes its own figures from `encode`."""

    def __init__(self, model=None, reference=None, settings: EvalSettings = EvalSettings(),
                 progress: PhaseProgress | None = None, layers: bool = True) -> None:
        self.model, self.reference, self.settings, self.progress, self.layers = (model, reference, settings,
                                                                                 progress, layers)

    def report(self, label: str) -> Callable[[int, int], None] | None:
        """A (done, total) callback that shows `label` as the phase, or None without progress."""
        return (lambda done, total: self.progress(label, done, total)) if self.progress else None

    def encode(self, texts: list[str], label: str) -> np.ndarray:
        """The model's embeddings of `texts` (cached on disk), the phase named `label` while it encodes."""
        return encode_cached(self.model, texts, progress=self.report(label))

    def retrieval(self, corpus) -> dict:
        """P@k and S@k (judged by the reference), kNN and linear-probe accuracy of a labelled corpus's target texts."""
        settings = self.settings
        result = evaluate(self.model, self.reference, corpus, settings, progress=self.progress, layers=self.layers)
        result["kind"] = "labelled"
        key, order = canonical("texts", [(corpus.classes[c], t) for c, t in zip(corpus.test_labels, corpus.test_texts)])
        result[ITEMS_OF] = {"texts": key}
        result.setdefault(ITEMS, {}).update(order)
        sample = self.sample(corpus)
        result[CONDITIONS] = {"k": result["k"], "discount": result["discount"], "knn_k": settings.knn_k,
                              "knn_metric": settings.knn_metric, "judge": model_fingerprint(self.reference),
                              "train": key_hash([sample.train_texts, [corpus.classes[c] for c in sample.train_labels]])}
        return result

    def sts(self, pairs) -> dict:
        """STS Spearman on a pair corpus's target pairs."""
        return evaluate_pairs(self.model, pairs, "", progress=self.report(TEXTS_OF.format("target pairs")))

    def ordering(self, lists) -> dict:
        """Ordering accuracy and Kendall tau on a list corpus's target lists."""
        return evaluate_lists(self.model, lists, "", progress=self.report(TEXTS_OF.format("target lists")))

    def rerank(self, rows) -> dict:
        """Reranking accuracy on (query, positive, negatives) rows: a negatives file's target rows."""
        return rerank_metrics(rows, self.encode)

    def sample(self, corpus) -> EvalSets:
        """The train sample and targets a labelled corpus's evaluation encodes (the kNN and P@k pool's sample)."""
        return eval_sets(corpus, self.settings)

    def train_sample(self, corpus) -> list[str]:
        """The training texts of `sample`."""
        return self.sample(corpus).train_texts

    @staticmethod
    def pair_texts(pairs) -> list[str]:
        """The distinct texts of a pair corpus's target pairs, as `sts` encodes them."""
        return pair_texts(pairs)

    @staticmethod
    def list_texts(lists) -> list[str]:
        """The distinct members of a list corpus's target lists, as `ordering` encodes them."""
        return list_texts(lists.test)


def evaluation_texts(corpus, settings: EvalSettings = EvalSettings(), sts: PairCorpus | None = None,
                     lists: ListCorpus | None = None) -> list[list[str]]:
    """The text lists one evaluation of a model encodes (each a cache entry): for ETAs and cache checks."""
    out = kind_of(corpus).evaluation_texts(corpus, Scorer(settings=settings))
    if lists is not None and lists is not corpus:
        out.append(list_texts(lists.test))
    if sts is not None and sts.columns.score is not None:
        out.append(pair_texts(sts))
    return out


def _compute(model, reference, corpus, settings: EvalSettings, progress: PhaseProgress | None,
             sts: PairCorpus | None, lists: ListCorpus | None, layers: bool) -> dict:
    scorer = Scorer(model, reference, settings, progress, layers)
    result = kind_of(corpus).evaluate(corpus, scorer)
    parts = []
    if lists is not None and lists is not corpus:
        parts.append(ordering_metrics(model, lists, progress=scorer.report(TEXTS_OF.format("target lists"))))
    if sts is not None:  # its STS Spearman, over its own target pairs: n_pairs counts those, not the corpus's
        parts.append({**sts_scored(model, sts, progress=scorer.report(TEXTS_OF.format("STS pairs"))),
                      "n_pairs": len(sts.test)})
    for part in parts:  # their per-item arrays join the corpus's own
        items, of = part.pop(ITEMS, {}), part.pop(ITEMS_OF, {})
        result.update(part)
        result.setdefault(ITEMS, {}).update(items)
        result.setdefault(ITEMS_OF, {}).update(of)
    return with_intervals(result, result.get("n_pairs", 0))  # the pairs STS Spearman is over


def with_intervals(result: dict, sts_pairs: int) -> dict:
    """The result with a 95% interval `<metric>_ci` beside each headline figure it holds that has none yet: P@k and
    S@k their bootstrap interval over targets (also kept under "uncertainty", which error bars read), kNN and
    linear-probe accuracy over the test texts, the share of exactly ordered lists and of reranked queries (Wilson),
    Kendall tau the bootstrap over lists, STS Spearman over `sts_pairs` pairs (Fisher z)."""
    out = dict(result)
    for key in ("polarity", "similarity"):
        bounds = (result.get("uncertainty") or {}).get(f"{key}_ci")
        if result.get(key) is not None and bounds is not None:
            out[f"{key}_ci"] = json_interval(bounds)
    for key, n in (("knn_accuracy", result.get("n_queries")), ("linear_accuracy", result.get("n_queries")),
                   ("ordering_accuracy", result.get("n_lists")), ("rerank_accuracy", result.get("n_queries"))):
        if result.get(key) is not None and n:
            out[f"{key}_ci"] = json_interval(proportion_ci(float(result[key]), int(n)))
    taus = (result.get(ITEMS) or {}).get("list_tau")
    if result.get("kendall_tau") is not None and taus is not None:
        out["kendall_tau_ci"] = json_interval(bootstrap_mean_ci(taus))
    if result.get("sts_spearman") is not None:
        out["sts_spearman_ci"] = json_interval(spearman_ci(float(result["sts_spearman"]), sts_pairs))
    return out


def _timed(model, reference, corpus, settings: EvalSettings, progress: PhaseProgress | None,
           sts: PairCorpus | None, lists: ListCorpus | None, layers: bool) -> dict:
    """_compute, with how long it took under "timing" (seconds in all, of them encoding and start-up before the first
    text, texts encoded), stored with
    the result in the cache. The encoding rate it measured is kept for later ETAs (core.models.rates)."""
    clock, t0 = EncodeClock(), time.monotonic()

    def report(label: str, done: int, total: int) -> None:
        clock.update(label, done, total)
        if progress:
            progress(label, done, total)

    result = _compute(model, reference, corpus, settings, report, sts, lists, layers)
    if (rate := clock.rate()) is not None:
        record_rate(model, rate)
    seconds = time.monotonic() - t0  # the estimate of encode_s extrapolates the first batches: never above the wall
    encode_s = min(clock.encode_s(), seconds)
    result["timing"] = {"seconds": round(seconds, 3), "encode_s": round(encode_s, 3),
                        "startup_s": round(min(clock.startup_s(t0), seconds - encode_s), 3), "texts": clock.texts}
    return result


def evaluate_corpus(model, reference, corpus, settings: EvalSettings = EvalSettings(),
                    progress: PhaseProgress | None = None, model_name: str | None = None, *,
                    sts: PairCorpus | None = None, lists: ListCorpus | None = None, layers: bool = True,
                    timing: dict | None = None) -> dict:
    """What `model` scores on `corpus` (S@k judged by `reference` on a labelled corpus), read from the result cache
    when this model, reference, corpus and settings were evaluated before. `progress(phase, done, total)` follows
    the encoding; `layers` records every layer's state in the same pass (core.evaluation.evaluate). `timing`, when
    given, is filled with how long computing the result took (seconds, encode_s, texts encoded; kept with the cached
    result, so an ETA knows the scoring time even on a hit) and whether this call read it from the cache."""
    fingerprint = model_fingerprint(model)
    judged = kind_of(corpus).judged  # by the reference, under the settings: both key the result
    key = ["evaluation", RESULT_VERSION, corpus.kind, corpus.fingerprint, fingerprint,
           (fingerprint if reference is model else model_fingerprint(reference)) if judged else None,
           asdict(settings) if judged else None,
           sts.fingerprint if sts is not None else None,
           lists.fingerprint if lists is not None and lists is not corpus else None]
    computed: list[bool] = []

    def compute() -> dict:
        computed.append(True)
        result = _timed(model, reference, corpus, settings, progress, sts, lists, layers)
        ref = key_hash(key)  # the per-item arrays are stored apart; the result names them
        per_item.save(ref, result.pop(ITEMS, {}))
        result["items"] = {"ref": ref, "of": result.pop(ITEMS_OF, {}), "conditions": result.pop(CONDITIONS, {}),
                           "content": CONTENT_VERSION}
        return result

    stored = cached_json(result_entry(key), compute)
    result = {k: v for k, v in stored.items() if k != "timing"}
    if timing is not None:
        timing.update(stored.get("timing") or {}, cached=not computed)
    judge = {"judge": source_name(reference)} if judged else {}  # S@k's judge, by name as the model is
    return {**result, "model": model_name or getattr(model, "contrastlab_source", "model"), **judge}
