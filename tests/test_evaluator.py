"""The sentence-transformers evaluator the trainer runs during training gives the same P@k, S@k and kNN
accuracy as core.evaluation.evaluate.evaluate on the same model, reference and corpus."""

import pytest

from core.data.corpus import load_corpus
from core.evaluation.evaluate import EvalSettings, evaluate
from core.evaluation.evaluator import TradeoffEvaluator
from core.storage import cache_dir


def test_evaluator_matches_evaluate(tiny_model, tmp_path):
    path = tmp_path / "corpus.csv"
    rows = [f"{topic} text number {i} about {topic}" for topic in ("sport", "food", "music") for i in range(20)]
    path.write_text("text,label\n" + "\n".join(f"{t},{t.split()[0]}" for t in rows), encoding="utf-8")
    corpus = load_corpus(path)
    settings = EvalSettings(k=8)
    expected = evaluate(tiny_model, tiny_model, corpus, settings)
    evaluator = TradeoffEvaluator(corpus, tiny_model, settings, name="demo")
    got = evaluator(tiny_model)
    for key in ("polarity", "similarity", "knn_accuracy", "linear_accuracy"):
        assert got[f"demo_{key}"] == pytest.approx(expected[key], abs=1e-6)
    assert evaluator.primary_metric == "demo_polarity"
    assert list(cache_dir("embeddings").glob("*.npy"))  # the reference side came from the cache
