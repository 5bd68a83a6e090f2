"""Every text encoded once per model (issue 23): an evaluation's pass records what the Layers page and CKA need, the
reference's results on a corpus are computed once for every run that starts from it, pair corpora read the
embedding cache, and `train --json` says where a run's time went."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
import torch
from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator, SimilarityFunction

import core.evaluation.evaluate as evaluate_module
import core.models.encode as encode_module
from core.cli import main
from core.data.corpus import demo_corpus_path, load_corpus
from core.data.pairs import load_pairs
from core.evaluation.corpus_eval import evaluate_corpus, evaluation_texts
from core.evaluation.evaluate import EvalSettings, compare_layers, eval_sets
from core.evaluation.sts import sts_spearman
import core.models.loading as loading
from core.errors import UserError
from core.models.loading import SavedModel, layer_dims, load_model, model_fingerprint
from core.models.rates import EncodeClock, encode_rate
from core.runs.store import RunStore
from core.storage import cache_dir
from tests.conftest import train_runs
from tests.test_sts import pair_table, pairs_of


@pytest.fixture
def encodes(monkeypatch) -> list[int]:
    """The number of texts of every encode() call (every forward pass over texts goes through it)."""
    calls: list[int] = []
    real = encode_module.encode

    def counted(model, texts, **kwargs):
        calls.append(len(texts))
        return real(model, texts, **kwargs)

    monkeypatch.setattr(encode_module, "encode", counted)
    return calls


def tiny_run_config(model_dir, corpus: str, **settings) -> dict:
    return {"corpus": corpus, "model": str(model_dir), "examples": 32, "batch_size": 16, "epochs": 1,
            "threshold": 0.0, "device": "cpu", **settings}


def test_a_run_records_the_layer_states_so_layers_compare_encodes_nothing(tiny_model_dir, contrastlab_home, encodes):
    corpus_path = str(demo_corpus_path())
    (run_id,) = train_runs(contrastlab_home, [tiny_run_config(tiny_model_dir, corpus_path)])
    run = RunStore(contrastlab_home).get(run_id)
    reference, tuned = load_model(str(tiny_model_dir), "cpu"), load_model(run.artefacts["model"], "cpu")
    corpus = load_corpus(corpus_path)
    encodes.clear()
    rows = compare_layers(reference, tuned, corpus)
    assert encodes == []  # the before and after evaluations' passes hold every layer
    for path in cache_dir("embeddings").iterdir():
        path.unlink()
    assert compare_layers(reference, tuned, corpus) == rows  # the same figures as encoding afresh
    assert encodes  # ... which did encode


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The models load_model loads from here on (a SavedModel loads through it)."""
    calls: list[str] = []
    real = loading.load_model

    def counted(name=None, device=None):
        calls.append(str(name))
        return real(name, device)

    monkeypatch.setattr(loading, "load_model", counted)
    return calls


def test_layers_compare_after_a_run_loads_neither_model(tiny_model_dir, contrastlab_home, encodes, loads, capsys):
    """`layers --compare RUN` took 12-16 s with every state cached: it imported sentence-transformers and loaded
    both models only to fingerprint them (issue 32). The run remembered both fingerprints; the states are read."""
    corpus_path = str(demo_corpus_path())
    (run_id,) = train_runs(contrastlab_home, [tiny_run_config(tiny_model_dir, corpus_path)])
    encodes.clear(), loads.clear()
    assert main(["layers", corpus_path, "--compare", run_id, "--json"]) == 0
    assert (encodes, loads) == ([], [])
    rows = json.loads(capsys.readouterr().out)["layers"]
    run = RunStore(contrastlab_home).get(run_id)
    assert rows == json.loads(json.dumps(compare_layers(load_model(str(tiny_model_dir), "cpu"),
                                                        load_model(run.artefacts["model"], "cpu"),
                                                        load_corpus(corpus_path))))


def test_a_saved_models_fingerprint_is_remembered_for_its_files_and_computed_again_when_they_change(
        tiny_model_dir, tmp_path, loads):
    expected = model_fingerprint(load_model(str(tiny_model_dir), "cpu"))  # a load remembers it
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)  # copy2: sizes and modification times kept
    loads.clear()
    saved = SavedModel(str(copy))
    assert saved.fingerprint() == expected and layer_dims(saved) == (2, 32) and loads == []

    config = copy / "config.json"  # a config changed in place, same size and modification time
    stat, text = config.stat(), config.read_text()
    assert '"hidden_dropout_prob": 0.1' in text
    config.write_text(text.replace('"hidden_dropout_prob": 0.1', '"hidden_dropout_prob": 0.2'))
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert SavedModel(str(copy)).fingerprint() and loads == [str(copy)]

    other = load_model(str(tiny_model_dir), "cpu")  # other weights saved over the copy
    with torch.no_grad():
        next(other.parameters()).add_(1.0)
    other.save(str(copy))
    loads.clear()
    assert SavedModel(str(copy)).fingerprint() == model_fingerprint(other) != expected and loads == [str(copy)]

    with pytest.raises(UserError, match="Could not find model"):
        SavedModel(str(tmp_path / "missing"))


def test_the_saved_model_has_the_fingerprint_its_after_evaluation_was_cached_under(tiny_model_dir, contrastlab_home):
    (run_id,) = train_runs(contrastlab_home, [tiny_run_config(tiny_model_dir, str(demo_corpus_path()))])
    run = RunStore(contrastlab_home).get(run_id)
    fingerprint = model_fingerprint(load_model(run.artefacts["model"], "cpu"))
    assert any(path.name.startswith(fingerprint) for path in cache_dir("embeddings").glob("*-layers.npy"))


def test_the_second_run_reads_the_reference_result_instead_of_evaluating_again(tiny_model_dir, contrastlab_home,
                                                                               encodes):
    corpus_path = str(demo_corpus_path())
    # two seeds: two different models (two margins would train the same one when every triplet is active)
    first, second = train_runs(contrastlab_home, [tiny_run_config(tiny_model_dir, corpus_path, seed=0),
                                                  tiny_run_config(tiny_model_dir, corpus_path, seed=1)])
    store = RunStore(contrastlab_home)
    assert store.get(first).before == store.get(second).before
    texts = sum(len(t) for t in evaluation_texts(load_corpus(corpus_path)))
    # the reference once (before), each fine-tuned model once (after); never the reference again
    assert sum(encodes) == 3 * texts


def test_layer_states_too_big_for_the_cache_are_not_recorded_and_computed_for_the_knn_rows(
        tiny_model, contrastlab_home, monkeypatch, encodes):
    corpus = load_corpus(demo_corpus_path())
    monkeypatch.setattr(evaluate_module, "LAYER_CACHE_BYTES", 1)
    evaluate_corpus(tiny_model, tiny_model, corpus)
    assert list(cache_dir("embeddings").glob("*-layers.npy")) == []
    encodes.clear()
    evaluate_module.evaluate_layers(tiny_model, corpus)
    assert encodes == [len(eval_sets(corpus, EvalSettings()).knn), len(corpus.test_texts)]


def test_sts_spearman_is_sentence_transformers_own_figure_and_a_second_call_encodes_nothing(tiny_model, encodes):
    pairs = pairs_of(pair_table(n_test=40))
    evaluator = EmbeddingSimilarityEvaluator(pairs.test.text1, pairs.test.text2, pairs.test.scores.tolist(),
                                             main_similarity=SimilarityFunction.COSINE, write_csv=False)
    theirs = 100 * evaluator(tiny_model)[evaluator.primary_metric]
    assert sts_spearman(tiny_model, pairs) == pytest.approx(theirs, abs=1e-4)
    encodes.clear()
    reported: list[tuple[int, int]] = []
    assert sts_spearman(tiny_model, pairs, progress=lambda d, t: reported.append((d, t))) == pytest.approx(theirs,
                                                                                                           abs=1e-4)
    assert encodes == [] and reported == []


def test_the_sts_evaluation_reports_texts_done_out_of_total(tiny_model):
    pairs = pairs_of(pair_table(n_test=100))
    reported: list[tuple[str, int, int]] = []
    evaluate_corpus(tiny_model, tiny_model, pairs, progress=lambda *r: reported.append(r))
    (texts,) = evaluation_texts(pairs)
    # issue 31, item 3.3: the phase says it counts texts (5,001 of them for 4,906 pairs), not pairs
    assert reported and reported[-1] == ("encoding the target pairs' distinct texts", len(texts), len(texts))
    assert [r[1] for r in reported] == sorted(r[1] for r in reported)


def test_a_pair_run_after_evaluate_encodes_the_reference_no_more(tiny_model_dir, tmp_path, contrastlab_home,
                                                                  encodes, capsys):
    path = tmp_path / "pairs.csv"
    pair_table(n_test=30, n_train=40).to_csv(path, index=False)
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    encodes.clear()
    (run_id,) = train_runs(contrastlab_home, [tiny_run_config(tiny_model_dir, str(path), recipe="raoe",
                                                              examples=40)])
    run = RunStore(contrastlab_home).get(run_id)
    assert run.before["sts_spearman"] == pytest.approx(evaluated["sts_spearman"])
    # the teacher scores the training pairs (text1, text2); of the target texts only the fine-tuned model's pass
    assert encodes.count(len(evaluation_texts(load_pairs(path))[0])) == 1 and len(encodes) == 3


def test_train_json_prints_where_the_time_went(tiny_model_dir, tmp_path, contrastlab_home, capsys):
    code = main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--examples", "32",
                 "--batch-size", "16", "--threshold", "0", "--device", "cpu", "--json", "--foreground"])
    assert code == 0
    timings = json.loads(capsys.readouterr().out)["timings"]
    assert {"load_s", "evaluate_before_s", "examples_s", "train_s", "evaluate_after_s", "save_s"} <= set(timings)
    assert all(isinstance(v, (int, float)) and v >= 0 for v in timings.values())


def test_an_evaluation_keeps_the_encode_rate_it_measured(tiny_model, contrastlab_home):
    assert encode_rate(tiny_model) is None
    timing: dict = {}
    evaluate_corpus(tiny_model, tiny_model, load_corpus(demo_corpus_path()), timing=timing)
    assert encode_rate(tiny_model) > 0 and timing["cached"] is False
    assert timing["texts"] == sum(len(t) for t in evaluation_texts(load_corpus(demo_corpus_path())))
    assert 0 < timing["encode_s"] <= timing["seconds"]
    again: dict = {}
    evaluate_corpus(tiny_model, tiny_model, load_corpus(demo_corpus_path()), timing=again)
    assert again == {**timing, "cached": True}  # the scoring time of the computation, kept with its result


@pytest.mark.parametrize("garbage", ["", "{", "[1, 2]", '{"x": "fast"}', "null"])
def test_a_garbled_rates_file_counts_as_never_measured(tiny_model, contrastlab_home, garbage):
    (contrastlab_home / "cache").mkdir(parents=True, exist_ok=True)
    (contrastlab_home / "cache" / "encode_rates.json").write_text(garbage)
    assert encode_rate(tiny_model) is None


def test_the_encode_clock_leaves_the_first_batch_out_of_the_rate():
    now = [0.0]
    clock = EncodeClock(lambda: now[0])
    for done, at in ((64, 5.0), (128, 5.5), (192, 6.0), (256, 6.5)):  # 5 s of start-up, then 128 texts/s
        now[0] = at
        clock.update("train", done, 256)
    assert clock.rate() == pytest.approx(384.0 / 3)  # 192 texts in 1.5 s
    assert clock.texts == 256 and clock.encode_s() == pytest.approx(2.0)
    assert clock.startup_s(0.0) == pytest.approx(4.5)  # before the first batch's 0.5 s: the workers starting
    few = EncodeClock(lambda: now[0])
    few.update("x", 10, 20)
    assert few.rate() is None


def test_evaluation_texts_are_what_export_and_evaluation_encode(tiny_model):
    corpus = load_corpus(demo_corpus_path())
    sets = eval_sets(corpus, EvalSettings())
    assert evaluation_texts(corpus) == [sets.train_texts, list(corpus.test_texts)]
    pairs = pairs_of(pair_table())
    assert evaluation_texts(pairs) == [list(dict.fromkeys([*pairs.test.text1, *pairs.test.text2]))]
    assert np.all([isinstance(t, str) for part in evaluation_texts(corpus) for t in part])


def test_a_pair_corpus_without_scores_still_exports_its_target_texts(tiny_model, tmp_path):
    """Its evaluation encodes nothing (no STS without scores), but its texts are still what export writes."""
    from core.runs.export import write_embeddings

    pairs = pairs_of(pair_table().drop(columns="score").assign(label="neutral"))
    assert evaluation_texts(pairs) == []
    written = write_embeddings(tiny_model, pairs, tmp_path)
    assert np.load(written[1]).shape[0] == len(set([*pairs.test.text1, *pairs.test.text2]))


def test_every_figure_of_an_evaluation_carries_its_interval(tiny_model, contrastlab_home):
    result = evaluate_corpus(tiny_model, tiny_model, load_corpus(demo_corpus_path()))
    low, high = result["knn_accuracy_ci"]
    assert 0 <= low < result["knn_accuracy"] < high <= 1
    pairs = pairs_of(pair_table())
    scored = evaluate_corpus(tiny_model, tiny_model, pairs)
    low, high = scored["sts_spearman_ci"]
    assert low < scored["sts_spearman"] < high


def test_intervals_of_shares_and_correlations_follow_their_textbook_forms():
    from core.evaluation.corpus_eval import with_intervals
    from core.evaluation.uncertainty import proportion_ci, spearman_ci

    low, high = proportion_ci(0.5, 100)
    assert (round(low, 4), round(high, 4)) == (0.4038, 0.5962)  # Wilson, z = 1.96
    assert proportion_ci(1.0, 10)[1] == 1.0 and proportion_ci(0.0, 10)[0] == pytest.approx(0.0, abs=1e-12)
    low, high = spearman_ci(80.0, 1379)
    assert (round(low, 1), round(high, 1)) == (77.7, 82.1)  # Fisher z, Bonett-Wright: narrower toward 100
    assert all(math.isnan(v) for v in spearman_ci(80.0, 3))
    assert with_intervals({"sts_spearman": 50.0}, 3)["sts_spearman_ci"] == [None, None]  # JSON: null, not NaN
    assert "ordering_accuracy_ci" in with_intervals({"ordering_accuracy": 0.4, "n_lists": 20}, 0)



def test_every_headline_figure_gets_its_interval_and_one_reader_finds_it():
    """Issue 25: `<metric>_ci` beside each figure (the linear probe's and Kendall tau's were missing, P@k's and S@k's
    only under "uncertainty"); figure_interval reads a result stored either way."""
    from core.evaluation.corpus_eval import with_intervals
    from core.evaluation.headline import HEADLINE, intervals_text
    from core.evaluation.items import ITEMS
    from core.evaluation.uncertainty import bootstrap_mean_ci, figure_interval, proportion_ci

    taus = np.array([0.2, -0.4, 1.0, 0.6, 0.0])
    result = with_intervals({"polarity": 60.0, "similarity": 40.0, "uncertainty": {"polarity_ci": [55.0, 65.0],
                                                                                  "similarity_ci": [38.0, 42.0]},
                             "knn_accuracy": 0.8, "linear_accuracy": 0.7, "n_queries": 50, "kendall_tau": 0.28,
                             "ordering_accuracy": 0.2, "n_lists": 5, "rerank_accuracy": 0.6,
                             ITEMS: {"list_tau": taus}}, 0)
    assert result["polarity_ci"] == [55.0, 65.0] and result["similarity_ci"] == [38.0, 42.0]
    assert result["linear_accuracy_ci"] == list(proportion_ci(0.7, 50))
    assert result["rerank_accuracy_ci"] == list(proportion_ci(0.6, 50))  # a negatives file's, over its queries
    assert result["kendall_tau_ci"] == list(bootstrap_mean_ci(taus))
    assert all(figure_interval(result, m.key) is not None for m in HEADLINE if m.key != "sts_spearman")
    older = {"polarity": 60.0, "uncertainty": {"polarity_ci": [55.0, 65.0]}}  # a run stored before
    assert figure_interval(older, "polarity") == (55.0, 65.0)
    for bounds in ([None, None], [1.0], "x", [float("nan"), 1.0], ["a", 1]):
        assert figure_interval({"knn_accuracy_ci": bounds}, "knn_accuracy") is None
    assert intervals_text(result, 16).startswith("P@16 55.0–65.0 · S@16 38.0–42.0 · kNN accuracy ")
    assert "Kendall tau " in intervals_text(result) and intervals_text({"polarity": 60.0}) == ""
