"""The evaluation as a sentence-transformers evaluator, so the trainer scores a run while it trains."""

from __future__ import annotations

from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from core.data.corpus import Corpus
from core.evaluation.evaluate import EvalSettings, PhaseProgress, encode_for_eval, eval_sets, score
from core.models.encode import encode


class TradeoffEvaluator(SentenceEvaluator):
    """P@k, S@k and kNN accuracy during training; the reference embeddings are computed once up front.

    `progress` (phase, done, total) follows its encoding, so a run can count its ETA down during an evaluation;
    the trainer sets it when it attaches the evaluator."""

    def __init__(self, corpus: Corpus, reference, settings: EvalSettings = EvalSettings(), name: str = "",
                 batch_size: int = 64, progress: PhaseProgress | None = None):
        super().__init__()
        self.corpus, self.settings, self.name, self.batch_size = corpus, settings, name, batch_size
        self.progress = progress
        self.sets = eval_sets(corpus, settings)
        self.ref_train, self.ref_test = encode_for_eval(reference, corpus, self.sets, "reference", shared=True)
        self.primary_metric = "polarity"

    def _encode(self, model, texts: list[str], phase: str):
        report = self.progress
        return encode(model, texts, batch_size=self.batch_size,
                      progress=(lambda d, t: report(phase, d, t)) if report else None).embeddings

    def __call__(self, model, output_path: str | None = None, epoch: int = -1, steps: int = -1) -> dict:
        m_train = self._encode(model, self.sets.train_texts, "encoding train sample")
        m_test = self._encode(model, self.corpus.test_texts, f"encoding {self.corpus.target_split}")
        metrics = score(self.corpus, self.sets, self.settings, m_train, m_test, self.ref_train, self.ref_test)
        metrics = {k: v for k, v in metrics.items() if isinstance(v, float)}
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics
