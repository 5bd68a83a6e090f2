"""The whole-run ETA (core.training.eta) with made-up durations, and a tiny real run: its evaluation history spans
the run (step 0 to the last step, each once), the trainer never repeats the after-evaluation, and every phase after
the first step reports the time left."""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time

import pytest

import core.jobs.launch
from core.cli.training import follow
from core.errors import Cancelled
from core.evaluation.evaluator import TradeoffEvaluator
from core.runs.store import Run, RunStore
from core.training import trainer
from core.training.config import TrainConfig
from core.training.eta import FORWARD_BACKWARD, EncodeShare, RunEta, save_seconds, work_curve
from core.training.trainer import run_training
from tests.test_mgh import labelled_csv
from tests.test_sts import pair_table
from ui.run_panel import progress_text


def steps_left(eta: RunEta, step_s: float) -> list[float]:
    """The ETA after each step of a run whose steps take step_s, no evaluation under way."""
    return [eta.training(step, step * step_s) for step in range(1, eta.total_steps + 1)]


# --- the estimate ---------------------------------------------------------------------------------------------------


def test_the_benchmark_case_counts_the_evaluation_after_training():
    """At step 2 of 12 with 167 s of training left, an 80 s after-evaluation and a 1 s save, the run has 248 s left;
    the old ETA said 168 s (training only)."""
    eta = RunEta(total_steps=12, eval_s=80.0, save_s=1.0)
    assert eta.training(1, 16.7) is not None
    assert eta.training(2, 33.4) == pytest.approx(10 * 16.7 + 80 + 1)


def test_counts_down_step_by_step_to_the_final_evaluation_and_save():
    eta = RunEta(total_steps=10, eval_s=5.0, save_s=1.0)
    left = steps_left(eta, 2.0)
    assert all(a > b for a, b in zip(left, left[1:]))
    assert left[0] == pytest.approx(9 * 2 + 5 + 1) and left[-1] == pytest.approx(5 + 1)


def test_in_training_evaluations_are_counted_and_none_at_the_last_step():
    eta = RunEta(total_steps=12, eval_every=4, eval_s=10.0, save_s=0.0)
    assert [eta.evaluations_left(s) for s in (0, 2, 4, 7, 8, 11, 12)] == [2, 2, 1, 1, 0, 0, 0]
    assert eta.training(2, 2.0) == pytest.approx(10 * 1 + (2 + 1) * 10)  # at 4 and 8, then after training
    divides = RunEta(total_steps=12, eval_every=3)
    assert [divides.evaluations_left(s) for s in (0, 3, 9)] == [3, 2, 0]  # 3, 6, 9; not 12


def test_a_measured_evaluation_replaces_the_estimate_and_counts_down_while_it_runs():
    eta = RunEta(total_steps=12, eval_every=4, eval_s=10.0, save_s=1.0)
    eta.training(4, 4.0)
    at_start = eta.evaluating(4, 0.0, 0.0)
    assert at_start == pytest.approx(10 + 8 * 1 + 2 * 10 + 1)  # this one, the rest, one at 8, after, save
    halfway = eta.evaluating(4, 5.0, 0.5)
    assert halfway == pytest.approx(at_start - 5)
    slower = eta.evaluating(4, 10.0, 0.5)  # half done in the whole estimate: the other half takes as long
    assert slower == pytest.approx(at_start)
    eta.add_evaluation(20.0)
    assert eta.evaluation_s() == 20.0 and eta.training(5, 5.0) == pytest.approx(7 + 2 * 20 + 1)


def test_the_evaluation_after_training_counts_down_from_its_encoding_then_saving():
    eta = RunEta(total_steps=4, eval_s=8.0, save_s=2.0)
    shown = [eta.final(elapsed, share) for elapsed, share in ((0, 0), (2, 0.25), (4, 0.5), (8, 1.0))]
    assert shown == pytest.approx([10, 8, 6, 2])
    assert eta.saving(0.0) == 2.0 and eta.saving(1.5) == 0.5 and eta.saving(5.0) == 0.0


def test_an_evaluations_first_batch_does_not_set_its_pace():
    """At 64 of 5,952 texts after 1.2 s (start-up included), the pace would say 110 s for a 10 s evaluation."""
    eta = RunEta(total_steps=4, eval_s=10.0)
    assert eta.final(1.2, 64 / 5952) == pytest.approx(10 * (1 - 64 / 5952))
    assert eta.final(6.0, 0.2) == pytest.approx(24.0)  # a fifth done in 6 s: its own pace from here on
    share = EncodeShare(1000)
    share.update("test", 100, 1000, elapsed_s=3.0)  # the first batch's report, 3 s in: start-up and one batch
    share.update("test", 300, 1000, elapsed_s=5.0)  # then 200 texts in 2 s
    assert share.since == (3.0, 0.1)
    slow = RunEta(total_steps=4, eval_s=4.0)  # estimated 4 s; it runs slower: its pace counts from the first batch
    assert slow.final(5.0, share.fraction, share.since) == pytest.approx(7.0)  # 700 more at 100 / s, not 700 / 60


def _longest_first_evaluation(work) -> list[float]:
    """The ETAs an evaluation after training reports as it encodes two phases (a 1,800-text train sample, a
    200-text hold-out) longest first in batches of 64, each text taking as long as its characters plus 10, with
    lengths as skewed as SST-2's; its estimate, eval_s, is its true duration."""
    import random

    rng = random.Random(0)
    phases = {name: sorted((int(rng.lognormvariate(4.3, 0.6)) for _ in range(n)), reverse=True)
              for name, n in (("train sample", 1800), ("holdout", 200))}
    per_char = 1e-4
    truth = sum(length + 10 for lengths in phases.values() for length in lengths) * per_char
    eta = RunEta(total_steps=4, eval_s=truth, eval_texts=2000,
                 work=work([" " * n for lengths in phases.values() for n in lengths]) if work else None)
    share, elapsed, shown = eta.share(), 0.0, []
    for name, lengths in phases.items():
        for start in range(0, len(lengths), 64):
            elapsed += sum(n + 10 for n in lengths[start : start + 64]) * per_char
            share.update(name, min(start + 64, len(lengths)), len(lengths), elapsed)
            shown.append(eta.final(elapsed, share.fraction, share.since or (0.0, 0.0)) + elapsed)
    return [end / truth for end in shown]  # each report's predicted end, as a multiple of the true duration


def test_a_longest_first_encode_is_paced_by_its_work_not_its_texts():
    """Item 18: counted in texts, the long texts encoded first set a pace that predicted about twice the time left,
    and the ETA jumped up as the evaluation after training got going. Counted in work it stays near the truth."""
    by_texts = _longest_first_evaluation(None)
    assert max(by_texts) > 1.3  # the failure, as it was
    by_work = _longest_first_evaluation(work_curve)
    assert max(by_work) < 1.1 and min(by_work) > 0.9
    assert work_curve([])(0.5) == 0.5 and work_curve(["ab", "a"])(1.0) == pytest.approx(1.0)
    assert work_curve(["a" * 90, ""])(0.5) == pytest.approx(100 / 110)  # the long text first


def test_the_before_evaluations_start_up_is_not_counted_in_the_next_one(tiny_model, contrastlab_home):
    from datasets import Dataset

    from core.models.rates import record_rate

    cfg = TrainConfig.from_dict({"corpus": "c.csv", "model": "m"})
    dataset = Dataset.from_dict({"anchor": ["a"], "positive": ["b"], "negative": ["c"]})
    record_rate(tiny_model, 100.0)
    timing = {"seconds": 20.0, "encode_s": 10.0, "startup_s": 5.0, "texts": 1000}
    assert trainer._run_eta(cfg, tiny_model, dataset, timing, 1000).eval_s == pytest.approx(5.0 + 10.0)


def test_the_first_step_set_up_is_left_out_of_the_step_rate():
    eta = RunEta(total_steps=10)
    assert eta.training(1, 10.0) == pytest.approx(9 * 10.0)  # one step: all there is
    assert eta.training(2, 11.0) == pytest.approx(8 * 1.0)  # later steps take 1 s


def test_without_a_measured_encode_rate_the_encoding_counts_at_the_training_rate():
    """No rate measured on this machine yet: the scoring time known, a training step of 32 texts taking 3 s encodes,
    forward only, 32 texts a second, so 320 texts take 10 s."""
    eta = RunEta(total_steps=5, score_s=2.0, eval_texts=320, texts_per_step=32)
    assert eta.evaluation_s() == 2.0  # no step measured yet
    eta.training(1, 3.0)
    assert eta.evaluation_s() == pytest.approx(2.0 + 320 / 32 * 3.0 / FORWARD_BACKWARD)


def test_an_evaluation_estimated_from_the_encode_rate_wins_over_the_training_rate():
    eta = RunEta(total_steps=5, eval_s=12.0, score_s=2.0, eval_texts=320, texts_per_step=32)
    eta.training(1, 3.0)
    assert eta.evaluation_s() == 12.0


def test_without_in_training_evaluation_only_the_final_one_counts():
    eta = RunEta(total_steps=10, eval_every=0, eval_s=3.0)
    assert [eta.evaluations_left(s) for s in (0, 5, 10)] == [0, 0, 0]
    assert eta.training(5, 5.0) == pytest.approx(5 + 3)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -5.0])
def test_never_negative_nor_non_finite(bad):
    eta = RunEta(total_steps=10, eval_every=3, eval_s=bad, score_s=bad, save_s=bad)
    eta.add_evaluation(bad)
    assert eta.training(0, 1.0) is None and eta.training(3, bad) is None
    eta.training(3, 3.0)
    values = [eta.training(step, 3.0 + step) for step in (4, 10, 50)]
    values += [eta.evaluating(6, bad, bad), eta.evaluating(6, 1e9, 0.0), eta.final(bad, bad), eta.final(1e9, 2.0),
               eta.final(1e9, 0.0), eta.saving(bad), eta.saving(1e9)]
    assert all(math.isfinite(v) and v >= 0 for v in values), values


def test_before_the_first_step_there_is_no_estimate():
    eta = RunEta(total_steps=10, eval_every=2)
    assert eta.training(0, 0.0) is None and eta.evaluating(0, 0.0, 0.0) is None


def test_a_cancelled_run_has_nothing_left():
    eta = RunEta(total_steps=100, eval_every=10, eval_s=30.0, save_s=2.0)
    assert eta.training(5, 5.0) > 100
    eta.cancel()
    assert [eta.training(6, 6.0), eta.evaluating(6, 1.0, 0.5), eta.final(1.0, 0.5), eta.saving(0.0)] == [0] * 4


def test_saving_time_grows_with_the_weights():
    assert 0 < save_seconds(0) < save_seconds(90_000_000) < save_seconds(1_300_000_000)
    assert save_seconds(-1) == save_seconds(0)


def test_encode_share_sums_the_phases_of_one_evaluation():
    share = EncodeShare(100)
    assert share.fraction == 0.0
    assert share.update("encoding train sample", 40, 80) == pytest.approx(0.4)
    assert share.update("encoding train sample", 80, 80) == pytest.approx(0.8)
    assert share.update("encoding test", 20, 20) == 1.0 and (share.done, share.total) == (100, 100)
    unknown = EncodeShare(0)  # texts not known up front: the phases' own totals
    assert unknown.update("target lists", 3, 12) == pytest.approx(0.25) and unknown.total == 12


# --- a whole run on a fake clock ----------------------------------------------------------------------------------


def simulated_run(steps: int, step_s: float, first_extra_s: float, eval_every: int, eval_texts: int,
                  measured_rate: float, true_rate: float, score_s: float, save_s: float) -> list[tuple[float, float]]:
    """(time, ETA shown) at every report of a run, as the trainer makes them, on a fake clock: the before-evaluation
    came from the cache (its result carries the scoring time), the encode rate was measured by an earlier run on
    this machine (`measured_rate`); the evaluations really encode at `true_rate`. Returns the reports and, last,
    (end time, 0)."""
    eta = RunEta(total_steps=steps, eval_every=eval_every, eval_s=score_s + eval_texts / measured_rate,
                 score_s=score_s, eval_texts=eval_texts, texts_per_step=32, save_s=save_s)
    evaluation = score_s + eval_texts / true_rate
    now, train_s, shown = 6.0, 0.0, []  # loading, the cached before-evaluation and the examples took 6 s

    def evaluate(estimate) -> None:
        nonlocal now
        start = now
        for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):  # encode progress reports through the evaluation
            now = start + fraction * (evaluation - score_s)
            shown.append((now, estimate(now - start, fraction)))
        now = start + evaluation

    for step in range(1, steps + 1):
        took = step_s + (first_extra_s if step == 1 else 0.0)
        now, train_s = now + took, train_s + took
        left = eta.training(step, train_s)
        if left is not None:
            shown.append((now, left))
        if eval_every and step % eval_every == 0 and step < steps:
            start = now
            evaluate(lambda elapsed, fraction, step=step: eta.evaluating(step, elapsed, fraction))
            eta.add_evaluation(now - start)
    evaluate(eta.final)
    shown.append((now, eta.saving(0.0)))
    now += save_s
    return [*shown, (now, 0.0)]


@pytest.mark.parametrize(("eval_every", "steps", "rate_error"), [(25, 100, 1.2), (0, 40, 0.8), (10, 60, 1.25)],
                         ids=["labelled-evals", "pairs", "slow-machine"])
def test_the_eta_is_within_30_percent_at_a_quarter_half_and_three_quarters_of_a_run(eval_every, steps, rate_error):
    """The time left shown at 25 %, 50 % and 75 % of a run's wall time is within +-30 % of the time really left,
    with evaluations that take a fifth of the run or more and an encode rate measured earlier that is 20-25 % off
    what this run gets."""
    reports = simulated_run(steps, step_s=0.5, first_extra_s=2.0, eval_every=eval_every, eval_texts=3000,
                            measured_rate=100.0, true_rate=100.0 / rate_error, score_s=2.0, save_s=1.0)
    end = reports[-1][0]
    for share in (0.25, 0.5, 0.75):
        when, shown = max((r for r in reports if r[0] <= share * end), key=lambda r: r[0])
        left = end - when
        assert abs(shown - left) <= 0.3 * left, (share, shown, left)


# --- the run panel's words ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("progress", "text"), [
    ({"phase": "training", "step": 12, "total": 32, "unit": "steps", "eta_s": 200.0, "examples_per_s": 45.2},
     "training: 12 / 32 steps · about 3 min left · 45 examples/s"),
    ({"phase": "evaluating at step 40", "step": 300, "total": 829, "unit": "texts", "eta_s": 61.0},
     "evaluating at step 40: 300 / 829 texts · about 61 s left"),
    ({"phase": "evaluating after training", "step": None, "total": None, "unit": None, "eta_s": 12.4},
     "evaluating after training · about 12 s left"),
    ({"phase": "saving the model", "step": None, "total": None, "unit": None, "eta_s": 0.2},
     "saving the model · about 1 s left"),
    ({"phase": "evaluating before: model: encoding train sample", "step": 64, "total": 746, "eta_s": None},
     "evaluating before: model: encoding train sample: 64 / 746"),
], ids=["training", "evaluating", "after", "saving", "before"])
def test_the_panel_names_the_phase_and_the_time_left_in_every_phase_that_has_one(progress, text):
    run = Run(id="r", kind="train", status="running", created=0.0, started=0.0, finished=None, config={},
              progress=progress, metrics_before=None, metrics_after=None, history=[], losses=[], artefacts={},
              error=None, pid=1, sweep_id=None, cancel_requested=False)
    assert progress_text(run)[1] == text


def _running(progress: dict, started: float) -> Run:
    return Run(id="r", kind="train", status="running", created=started, started=started, finished=None, config={},
               progress=progress, metrics_before=None, metrics_after=None, history=[], losses=[], artefacts={},
               error=None, pid=1, sweep_id=None, cancel_requested=False)


def test_the_time_left_counts_down_between_reports_and_the_bar_never_falls_back(monkeypatch):
    """Issue 31, item 3.3: saving reported its estimate once, so the time left froze; and the bar fell to 0 % when
    the evaluation after training (whose texts count from 0) and saving (no count) began."""
    clock = {"now": 1000.0}
    monkeypatch.setattr("ui.run_panel.time.time", lambda: clock["now"])
    training = {"phase": "training", "step": 32, "total": 32, "unit": "steps", "eta_s": 30.0, "eta_at": 1000.0}
    after = {"phase": "evaluating after training", "step": 0, "total": 829, "unit": "texts", "eta_s": 30.0,
             "eta_at": 1000.0}
    saving = {"phase": "saving the model", "step": None, "total": None, "unit": None, "eta_s": 6.0,
              "eta_at": 1024.0}
    fractions = []
    for progress, now in ((training, 1000.0), (after, 1000.0), (after, 1010.0), (saving, 1024.0), (saving, 1027.0)):
        clock["now"] = now
        fraction, text = progress_text(_running(progress, started=910.0))
        fractions.append(fraction)
    assert fractions == sorted(fractions) and fractions[1] == pytest.approx(0.75)  # 90 s done of 120
    assert text == "saving the model · about 3 s left"  # 6 s estimated 3 s ago
    clock["now"] = 1100.0  # far past the estimate: no negative time, the bar full
    assert progress_text(_running(saving, started=910.0)) == (1.0, "saving the model · about 1 s left")


def test_a_run_waiting_for_its_worker_says_so_on_the_page_and_in_the_cli(contrastlab_home, capsys, monkeypatch):
    """A cold worker's imports take 6-13 s on a laptop; the CLI's bar showed no words meanwhile ("0it [00:08]")."""
    queued = dataclasses.replace(_running({}, started=0.0), status="queued", started=None, pid=None)
    assert progress_text(queued) == (0.0, "waiting for the worker process to start")
    assert progress_text(_running({}, started=0.0))[1] == "starting"  # taken, no phase reported yet
    waiting = {"phase": "starting 1 process(es), waiting for 1 other node(s)"}  # a DDP launcher's, still queued
    assert progress_text(dataclasses.replace(queued, progress=waiting)) == (0.0, waiting["phase"])
    store = RunStore(contrastlab_home)
    run_id = store.create("wait", {"steps": 1})
    monkeypatch.setattr(core.jobs.launch, "start", lambda s, r: None)  # a worker that has not taken it yet
    ended: list = []
    follower = threading.Thread(target=lambda: ended.append(follow(store, run_id)), daemon=True)
    follower.start()
    err, deadline = "", time.monotonic() + 60
    while "waiting for the worker process to start" not in err and time.monotonic() < deadline:
        time.sleep(0.1)
        err += capsys.readouterr().err
    store.claim(run_id, os.getpid())
    store.mark_running(run_id, os.getpid())
    store.mark_cancelled(run_id)
    follower.join(timeout=30)
    assert ended and ended[0].status == "cancelled"
    assert "waiting for the worker process to start" in err


@pytest.mark.parametrize("progress", [{}, {"eta_s": None}, {"eta_s": float("nan")}, {"eta_s": "5"},
                                      {"eta_s": 5.0, "eta_at": float("inf")}, {"eta_s": 5.0, "eta_at": "x"}])
def test_seconds_left_reads_only_a_finite_estimate(progress):
    from core.training.eta import seconds_left

    left = seconds_left(progress, 100.0)
    assert left is None if not isinstance(progress.get("eta_s"), float) or progress["eta_s"] != 5.0 else left == 5.0


# --- a tiny real run ------------------------------------------------------------------------------------------------


class Recorder:
    """A Reporter keeping every progress report (with the fields merged, as the run store does) and history point,
    and asking to stop once step `stop_after` was reported (the trainer asks after each step, so it stops after the
    next one)."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.fields: dict = {}
        self.reports: list[dict] = []
        self.history: list[dict] = []
        self.stop_after = stop_after

    def progress(self, **fields) -> None:
        self.fields.update(fields)
        self.reports.append(dict(self.fields))

    def should_stop(self) -> bool:
        return self.stop_after is not None and self.fields.get("phase") == "training" \
            and self.fields["step"] >= self.stop_after

    def log_loss(self, step: int, loss: float) -> None:
        pass

    def log_eval(self, point: dict) -> None:
        self.history.append(point)


@pytest.fixture
def counted(monkeypatch) -> dict[str, int]:
    """How often the trainer evaluates in training and run_training evaluates around it."""
    counts = {"in_training": 0, "around": 0}
    call, evaluate = TradeoffEvaluator.__call__, trainer.evaluate_corpus

    def in_training(self, *args, **kwargs):
        counts["in_training"] += 1
        return call(self, *args, **kwargs)

    def around(*args, **kwargs):
        counts["around"] += 1
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(TradeoffEvaluator, "__call__", in_training)
    monkeypatch.setattr(trainer, "evaluate_corpus", around)
    return counts


def tiny_config(tmp_path, tiny_model_dir, **kw) -> TrainConfig:
    """8 steps of 4 triplets on 72 labelled texts."""
    return TrainConfig(corpus=str(labelled_csv(tmp_path)), model=str(tiny_model_dir), recipe="triplet", examples=32,
                       batch_size=4, threshold=-1.0, device="cpu", **kw)


@pytest.mark.parametrize(("eval_every", "in_training"), [(4, [4]), (3, [3, 6])], ids=["divides", "does_not"])
def test_history_spans_the_run_and_the_last_step_is_evaluated_once(tmp_path, tiny_model_dir, counted, eval_every,
                                                                   in_training):
    pairs = tmp_path / "sts.csv"
    pair_table(n_test=12).to_csv(pairs, index=False)
    reporter = Recorder()
    result = run_training(tiny_config(tmp_path, tiny_model_dir, eval_every=eval_every, sts_corpus=str(pairs)),
                          reporter, tmp_path / "work")
    assert result["steps"] == 8
    assert [p["step"] for p in reporter.history] == [0, *in_training, 8]
    assert counted == {"in_training": len(in_training), "around": 2}  # before and after; never the trainer at 8
    first, last = reporter.history[0], reporter.history[-1]
    for key in ("polarity", "similarity", "knn_accuracy", "linear_accuracy", "sts_spearman"):
        assert first[key] == result["before"][key] and last[key] == result["after"][key]  # metrics_after complete
    assert all(isinstance(v, float) for p in reporter.history for k, v in p.items() if k != "step")

    after_start = [r for r in reporter.reports if r["phase"] != "training" and r.get("eta_s") is not None]
    phases = [r["phase"] for r in after_start]
    assert {f"evaluating at step {s}" for s in in_training} | {"evaluating after training", "saving the model"} \
        <= set(phases)
    started = next(i for i, r in enumerate(reporter.reports) if r["phase"] == "training")
    later = reporter.reports[started:]
    assert all(r["eta_s"] is not None and r["eta_s"] >= 0 for r in later)  # every phase from the first step on
    evaluating = [r for r in later if r["phase"] == "evaluating after training" and r.get("step")]
    assert evaluating[-1]["step"] == evaluating[-1]["total"] and evaluating[-1]["unit"] == "texts"


def test_without_in_training_evaluation_the_history_is_before_and_after(tmp_path, tiny_model_dir, counted):
    reporter = Recorder()
    run_training(tiny_config(tmp_path, tiny_model_dir, eval_every=0), reporter, tmp_path / "work")
    assert [p["step"] for p in reporter.history] == [0, 8]
    assert counted == {"in_training": 0, "around": 2}


def test_a_cancel_at_an_evaluation_step_stops_without_evaluating(tmp_path, tiny_model_dir, counted):
    reporter = Recorder(stop_after=3)  # so it stops at step 4, where it would evaluate
    with pytest.raises(Cancelled):
        run_training(tiny_config(tmp_path, tiny_model_dir, eval_every=4), reporter, tmp_path / "work")
    assert [p["step"] for p in reporter.history] == [0]
    assert counted == {"in_training": 0, "around": 1}
    assert reporter.fields["eta_s"] == 0 and not (tmp_path / "work" / "model").exists()


def test_the_worker_stamps_each_estimate_with_when_it_was_made():
    import time

    from core.jobs.worker import JobContext
    from core.runs.store import RunStore

    store = RunStore()
    run_id = store.create("train", {"corpus": "x.csv"})
    ctx = JobContext(store, store.get(run_id))
    before = time.time()
    ctx.progress(phase="saving the model", eta_s=4.0)
    ctx.flush()
    progress = store.get(run_id).progress
    assert progress["eta_s"] == 4.0 and before <= progress["eta_at"] <= time.time()


def test_the_run_s_bar_only_moves_forward_when_its_estimate_grows(contrastlab_home):
    """Issue 51: the bar went back (48% -> 29%, 99% -> 78%) when the evaluation after training started and the time
    left grew. The worker publishes the share done so far, which only grows, and the page's bar never falls below it."""
    import os
    import time

    from core.jobs.worker import JobContext
    from core.runs.store import RunStore
    from ui.run_panel import progress_text

    store = RunStore()
    run_id = store.create("wait", {})
    store.mark_running(run_id, os.getpid())
    ctx = JobContext(store, store.get(run_id))
    time.sleep(0.2)
    ctx.progress(phase="training", eta_s=0.2)  # about half done
    ctx.flush()
    first, _ = progress_text(store.get(run_id))
    ctx.progress(phase="evaluating after training", eta_s=2.0)  # the estimate grew
    ctx.flush()
    second, _ = progress_text(store.get(run_id))
    shares = store.get(run_id).progress["done_share"]
    assert 0.3 < first and second >= first and shares >= 0.3, (first, second, shares)
