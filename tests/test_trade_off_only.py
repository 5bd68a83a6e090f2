"""Trade-off-only evaluations (the quick point's): P@k and S@k from the test texts and the source pool alone, the
same figures as the whole evaluation gives, the reference's pool embeddings cut from its cached whole sample, and
runs that hold them shown without their kNN figures rather than failing."""

from __future__ import annotations

import copy

import pytest
import torch

import core.models.encode as encode_module
from core.data.corpus import demo_corpus_path, load_corpus
from core.evaluation.corpus_eval import evaluate_corpus
from core.evaluation.evaluate import EvalSettings, eval_sets, evaluate
from core.evaluation.headline import trade_off_only
from core.runs.store import RunStore
from core.training.config import TrainConfig
from tests.conftest import button, no_errors, train_tiny_run

TRADE_OFF = EvalSettings(knn_train_max=0)
KNN_FIGURES = ("knn_accuracy", "linear_accuracy", "per_class")


@pytest.fixture
def corpus():
    return load_corpus(demo_corpus_path())


@pytest.fixture
def encoded(monkeypatch) -> list[int]:
    """The number of texts of each encoding pass (cache misses only), in order."""
    seen: list[int] = []
    real = encode_module.encode

    def counting(model, texts, *args, **kwargs):
        seen.append(len(texts))
        return real(model, texts, *args, **kwargs)

    monkeypatch.setattr(encode_module, "encode", counting)
    return seen


@pytest.fixture
def tuned(tiny_model):
    """The tiny model with other weights: a fine-tuned model's stand-in."""
    model = copy.deepcopy(tiny_model)
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    return model


def test_a_trade_off_only_sample_is_the_source_pool_within_the_whole_sample(corpus):
    part, whole = eval_sets(corpus, TRADE_OFF), eval_sets(corpus, EvalSettings())
    assert len(part.knn) == 0 and list(part.train_rows) == sorted(part.pool) == sorted(whole.pool)
    assert part.whole is not None and list(part.whole.train_rows) == list(whole.train_rows)
    assert set(part.train_rows) < set(whole.train_rows) and part.key != whole.key


def test_it_scores_p_and_s_as_the_whole_evaluation_does_reading_the_whole_samples_embeddings(tiny_model, tuned,
                                                                                              corpus, encoded):
    whole = evaluate(tuned, tiny_model, corpus, EvalSettings())
    n_whole, n_test = len(eval_sets(corpus, EvalSettings()).train_texts), len(corpus.test_texts)
    assert encoded == [n_whole, n_test, n_whole, n_test]
    encoded.clear()
    part = evaluate(tuned, tiny_model, corpus, TRADE_OFF)
    assert encoded == []  # both models' pools are cut from their cached whole samples
    for key in ("polarity", "similarity", "polarity_sd", "similarity_sd"):
        assert part[key] == whole[key], key
    assert part["uncertainty"] == whole["uncertainty"] and part["n_knn_train"] == 0
    assert not any(key in part for key in KNN_FIGURES)


def test_on_a_cold_cache_the_fine_tuned_model_encodes_the_pool_alone_and_the_reference_its_whole_sample(
        tiny_model, tuned, corpus, encoded):
    """The reference's embeddings of the whole sample are read by mining, the Corpus page and every other run, so it
    encodes them whole even here; a fine-tuned model's trade-off-only evaluation encodes the pool and the test texts."""
    result = evaluate_corpus(tuned, tiny_model, corpus, TRADE_OFF)
    n_pool, n_test = len(eval_sets(corpus, TRADE_OFF).pool), len(corpus.test_texts)
    assert encoded == [n_pool, n_test, len(eval_sets(corpus, EvalSettings()).train_texts), n_test]
    assert trade_off_only(result) and result["polarity_ci"] and result["similarity_ci"]
    assert not any(key in result for key in (*KNN_FIGURES, "knn_accuracy_ci"))
    assert not trade_off_only(evaluate_corpus(tuned, tiny_model, corpus, EvalSettings()))


@pytest.mark.parametrize("value", ["maybe", 2, 0.5, None, [True]])
def test_a_bad_trade_off_only_setting_is_one_clear_error(value):
    from core.errors import UserError

    with pytest.raises(UserError, match="trade_off_only"):
        TrainConfig.from_dict({"corpus": "c.csv", "trade_off_only": value})


def test_a_trade_off_only_run_keeps_p_and_s_and_its_pages_say_why_the_rest_is_missing(app, tiny_model_dir,
                                                                                      contrastlab_home):
    run_id = train_tiny_run(contrastlab_home, tiny_model_dir, trade_off_only=True)
    run = RunStore().get(run_id)
    for result in (run.before, run.metrics_after):
        assert trade_off_only(result) and result["polarity_ci"] and result["similarity_ci"]
        assert not any(key in result for key in KNN_FIGURES)
    app.query_params["run"] = run_id
    app.run()
    at = app.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
    captions = " ".join(c.value for c in at.caption)
    assert "scored by P@k and S@k only" in captions, captions
    table = at.dataframe[0].value.set_index("run")
    assert table.loc[run_id, "P@k"] == pytest.approx(run.metrics_after["polarity"], abs=0.05)
    button(at, "Export").click().run()
    no_errors(at)


def test_the_runs_page_compares_a_trade_off_only_run_with_a_full_one_on_p_and_s(app, tiny_model_dir,
                                                                                 contrastlab_home):
    full = train_tiny_run(contrastlab_home, tiny_model_dir)
    quick = train_tiny_run(contrastlab_home, tiny_model_dir, trade_off_only=True, seed=1)
    app.query_params["run"] = quick
    app.run()
    at = app.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
    assert {at.selectbox(key="runs:a").value, at.selectbox(key="runs:b").value} == {quick, full}
    table = at.table[0].value
    assert table.loc["P@k"].notna().all() and table.loc["kNN accuracy"].isna().any()
    assert "A was scored by P@k and S@k only" in " ".join(c.value for c in at.caption)
