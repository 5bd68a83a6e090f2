"""STS evaluation of a pair corpus: how well the model's cosine ranks pairs like the gold similarity score."""

from __future__ import annotations

from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator, SimilarityFunction

from core.data.pairs import PairCorpus
from core.errors import UserError


def sts_spearman(model, pairs: PairCorpus, batch_size: int = 64) -> float | None:
    """Spearman correlation x 100 between cosine and gold score on the target split; None without a score column.

    sentence-transformers' own evaluator computes it, so the number matches what its training logs report.
    """
    if pairs.columns.score is None:
        return None
    target = pairs.test
    if len(set(target.scores.tolist())) < 2:
        raise UserError(f"Every pair of the {pairs.target_split} split has the same score, so a rank correlation "
                        "with it is undefined; check the score column.")
    evaluator = EmbeddingSimilarityEvaluator(target.text1, target.text2, target.scores.tolist(),
                                             batch_size=batch_size, main_similarity=SimilarityFunction.COSINE,
                                             name="sts", write_csv=False)
    return 100 * float(evaluator(model)[evaluator.primary_metric])


def evaluate_pairs(model, pairs: PairCorpus, model_name: str) -> dict:
    """What a pair corpus is judged by, shaped like evaluate()'s result: STS Spearman on its target split."""
    return {"kind": "pairs", "model": model_name, "sts_spearman": sts_spearman(model, pairs),
            "n_pairs": len(pairs.test), "target_split": pairs.target_split}
