"""Trade-off logic on the tiny model: points for the reference and finished runs (rescored only when k or the
judge changes), the share of active triplets per margin, and quick runs reused per margin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import core.data.mining
import core.evaluation.corpus_eval
import core.jobs.quick
from core.analysis.tradeoff import MARGIN_STEPS, margin_constraint_share, tradeoff_points
from core.data.corpus import demo_corpus_path, load_corpus
from core.data.mining import MiningSettings, mine
from core.evaluation.evaluate import EvalSettings, eval_sets, evaluate
from core.jobs import launch, worker
from core.jobs.quick import QUICK_BUDGET, is_quick, quick_run
from core.models.loading import load_model
from core.runs.store import RunStore


def finished_run(store: RunStore, model_dir: Path, margin: float = 0.5, **extra) -> str:
    """A triplet run trained in this process on the demo corpus (the worker's code path, minus the process)."""
    config = {"corpus": str(demo_corpus_path()), "model": str(model_dir), "recipe": "triplet", "margin": margin,
              "examples": 32, "batch_size": 16, **extra}
    run_id = store.create("train", config)
    worker.execute(store, run_id)
    assert store.get(run_id).status == "done", store.get(run_id).error
    return run_id


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tradeoff-home")


@pytest.fixture(autouse=True)
def use_shared_home(contrastlab_home, shared_home, monkeypatch) -> None:
    """One embedding / mining cache for the module, so each test does not re-encode the reference; every test
    still gets its own run store (RunStore(tmp_path)) unless it uses `trained`."""
    monkeypatch.setenv("CONTRASTLAB_HOME", str(shared_home))


@pytest.fixture(scope="module")
def trained(shared_home, tiny_model_dir) -> tuple[RunStore, str]:
    """A store holding one finished triplet run at margin 0.5, trained once for the module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTRASTLAB_HOME", str(shared_home))
        store = RunStore(shared_home / "trained")
        return store, finished_run(store, tiny_model_dir)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(demo_corpus_path())


@pytest.fixture
def count_evaluations(monkeypatch) -> list:
    """The evaluations the trade-off asks for (each may then be read from the result cache)."""
    calls: list = []
    real = core.evaluation.corpus_eval.evaluate_corpus
    monkeypatch.setattr(core.evaluation.corpus_eval, "evaluate_corpus",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw))
    return calls


def test_reference_alone_then_runs_with_stored_metrics_reused_at_their_k(tiny_model, trained, corpus, tmp_path,
                                                                         count_evaluations):
    only = tradeoff_points(RunStore(tmp_path), corpus, tiny_model, k=16)
    assert len(only) == 1 and only[0]["is_reference"] and only[0]["run_id"] is None
    assert only[0]["polarity"] == pytest.approx(evaluate(tiny_model, tiny_model, corpus)["polarity"])

    store, run_id = trained
    count_evaluations.clear()
    memo: dict = {}
    ref, point = tradeoff_points(store, corpus, tiny_model, k=16, memo=memo)
    assert count_evaluations == [1]  # the reference only: the run was evaluated at k = 16 by the same judge
    stored = store.get(run_id).metrics_after
    assert point["run_id"] == run_id and not point["is_reference"] and not point["quick"]
    assert (point["recipe"], point["margin"]) == ("triplet", 0.5)
    for key in ("polarity", "polarity_sd", "similarity", "similarity_sd"):
        assert point[key] == stored[key]

    tradeoff_points(store, corpus, tiny_model, k=16, memo=memo)
    assert count_evaluations == [1]  # the memo holds both points

    loaded: list = []
    at_5 = tradeoff_points(store, corpus, tiny_model, k=5, load_model=lambda p: loaded.append(p) or
                           load_model(p, "cpu"), memo=memo)
    assert count_evaluations == [1, 1, 1] and loaded == [store.get(run_id).artefacts["model"]]
    direct = evaluate(load_model(loaded[0], "cpu"), tiny_model, corpus, EvalSettings(k=5))
    assert at_5[1]["polarity"] == pytest.approx(direct["polarity"])
    assert at_5[1]["similarity"] == pytest.approx(direct["similarity"])
    assert at_5[0]["polarity"] != only[0]["polarity"] or at_5[0]["similarity"] != only[0]["similarity"]


def test_other_judge_rescores_and_runs_on_other_corpora_are_left_out(tiny_model, tiny_model_dir, trained, corpus,
                                                                     count_evaluations, tmp_path):
    store, run_id = trained
    other = load_model(str(tiny_model_dir), "cpu")
    other.contrastlab_source = str(tmp_path / "another-reference")  # same weights, but not the run's judge
    count_evaluations.clear()
    assert len(tradeoff_points(store, corpus, other, k=16)) == 2
    assert count_evaluations == [1, 1]

    elsewhere = RunStore(tmp_path)
    done = store.get(run_id)
    copy = elsewhere.create("train", done.config)
    elsewhere.mark_running(copy, 1)
    elsewhere.set_progress(copy, summary={"corpus": {"fingerprint": "another-corpus"}})
    elsewhere.mark_done(copy, done.metrics_after, done.artefacts)
    assert [p["run_id"] for p in tradeoff_points(elsewhere, corpus, tiny_model, k=16)] == [None]


def _direct_shares(model, corpus, margins) -> list[float]:
    """The same shares written out: mine as training does, encode the triplets' texts afresh, compare."""
    rows = eval_sets(corpus, EvalSettings()).train_rows
    texts = [corpus.train_texts[i] for i in rows]
    frame = mine(model, texts, corpus.train_labels[rows], "triplet", MiningSettings(),
                 corpus_fp=f"{corpus.fingerprint}-{len(rows)}").frame
    unique = sorted(set(frame.to_numpy().ravel()))
    vectors = dict(zip(unique, model.encode(unique, batch_size=128, normalize_embeddings=True)))
    a, p, n = (np.stack([vectors[t] for t in frame[col]]) for col in ("anchor", "positive", "negative"))
    d_ap, d_an = 1 - (a * p).sum(1), 1 - (a * n).sum(1)
    return [float(np.mean(d_ap + m > d_an)) for m in margins]


def test_margin_share_is_monotone_matches_numpy_and_is_instant_after_the_first_call(tiny_model, corpus,
                                                                                    monkeypatch):
    shares = margin_constraint_share(tiny_model, corpus, list(MARGIN_STEPS))
    assert [m for m, _ in shares] == list(MARGIN_STEPS)
    values = [s for _, s in shares]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert values == sorted(values)
    assert values[-1] == 1.0  # cosine distances lie in [0, 2]: a margin of 10 keeps every triplet active
    direct = _direct_shares(tiny_model, corpus, MARGIN_STEPS)
    assert values == pytest.approx(direct, abs=1e-3)  # at most a borderline triplet or two may flip

    def no_work(*a, **kw):
        raise AssertionError("the slider must not mine or encode again")

    monkeypatch.setattr(core.data.mining, "mine", no_work)
    monkeypatch.setattr("core.models.encode.encode_cached", no_work)
    assert margin_constraint_share(tiny_model, corpus, [0.25]) == [(0.25, dict(shares)[0.25])]


def test_quick_run_is_reused_per_margin_and_marked_on_the_plot(tiny_model, tiny_model_dir, corpus, monkeypatch,
                                                              tmp_path):
    monkeypatch.setattr(core.jobs.quick, "QUICK_BUDGET", {**QUICK_BUDGET, "examples": 32})  # 2 steps, not 16
    started: list = []

    def start_here(store, run_id):
        started.append(run_id)
        worker.execute(store, run_id)

    monkeypatch.setattr(launch, "start", start_here)
    store = RunStore(tmp_path)
    base = {"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir), "recipe": "triplet"}
    first = quick_run(store, base, 0.1)
    run = store.get(first)
    assert run.status == "done" and is_quick(run.config) and run.config["margin"] == 0.1
    assert all(run.config[key] == value for key, value in core.jobs.quick.QUICK_BUDGET.items())
    assert quick_run(store, dict(base), 0.1) == first  # same config: no new run
    assert quick_run(store, {**base, "threshold": 0.5}, 0.1) == first  # a default spelled out is the same config
    assert started == [first]
    point = tradeoff_points(store, corpus, tiny_model, k=16)[1]
    assert point["run_id"] == first and point["quick"] and point["margin"] == 0.1 and "(quick)" in point["name"]

    monkeypatch.setattr(launch, "start", lambda store, run_id: started.append(run_id))  # stays queued
    second = quick_run(store, base, 1.0)
    assert second != first and store.get(second).status == "queued"
    assert quick_run(store, base, 1.0) == second  # a queued run is reused too
    store.mark_failed(second, "boom")
    third = quick_run(store, base, 1.0)  # a failed one is not
    assert third not in (first, second)
    assert started == [first, second, third]
