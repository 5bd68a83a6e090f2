"""Runs in the trackers researchers already use (issue 31, section 2): `--report-to tensorboard,mlflow` (and the
Train page's choice) sends a run's settings, loss curve, evaluations before and after with their 95% intervals, tags
and status to TensorBoard (<home>/tensorboard/<run id>) and MLflow (MLFLOW_TRACKING_URI, else <home>/mlflow.db).
Hostile values are one line and exit 2; a tracker that cannot be reached fails the run before it trains; one that
fails later is logged and the trained model is kept."""

from __future__ import annotations

import pytest

import core.jobs.launch
from core.analysis.plots import loss_curve_figure
from core.cli import main
from core.data.corpus import demo_corpus_path
from core.errors import Cancelled
from core.jobs import worker
from core.jobs.process import LOG_NAME
from core.runs import trackers
from core.runs.labels import own_settings_text, run_label
from core.runs.store import RunStore
from core.training.config import TrainConfig
from tests.conftest import button, no_errors


def _mlflow_runs(uri: str):
    import mlflow

    mlflow.set_tracking_uri(uri)
    try:
        return mlflow.search_runs(search_all_experiments=True)
    finally:
        mlflow.set_tracking_uri(None)


@pytest.fixture(scope="module")
def reported(tmp_path_factory, tiny_model_dir) -> dict:
    """One tiny run from the CLI that reports to both trackers, in a home of its own."""
    home = tmp_path_factory.mktemp("tracked")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTRASTLAB_HOME", str(home))
        mp.delenv(trackers.MLFLOW_URI_ENV, raising=False)
        code = main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--examples", "32",
                     "--batch-size", "8", "--device", "cpu", "--report-to", "TensorBoard, mlflow", "--json",
                     "--foreground"])
        assert code == 0
        run = RunStore(home).list()[0]
        uri = trackers.mlflow_uri()
    return {"home": home, "run": run, "uri": uri}


def test_a_run_reported_to_mlflow_is_found_with_its_settings_and_evaluations(reported):
    run, home = reported["run"], reported["home"]
    assert run.status == "done" and run.config["report_to"] == "tensorboard,mlflow"
    assert reported["uri"] == f"sqlite:///{home.resolve() / 'mlflow.db'}"
    found = _mlflow_runs(reported["uri"])
    assert len(found) == 1
    row = found.iloc[0]
    assert row["tags.contrastlab.run_id"] == run.id and row["status"] == "FINISHED"
    assert row["tags.mlflow.runName"] == run_label(run, own_settings_text(run)) == f"triplet · margin 0.1 · {run.id}"
    assert row["params.recipe"] == "triplet" and row["params.corpus.name"] == "demo_corpus.csv"
    assert len(row["params.corpus.content"]) == 64 and row["params.examples"] == "32"
    for key in ("polarity", "similarity", "knn_accuracy"):
        shown = trackers.SHOWN[key].shown  # one scale for every figure: accuracies in %, as P@k and S@k (issue 51)
        assert row[f"metrics.after_{key}"] == pytest.approx(shown(run.metrics_after[key]))
        assert row[f"metrics.before_{key}"] == pytest.approx(shown(run.metrics_before[key]))
        low, high = run.metrics_after[f"{key}_ci"]
        assert (row[f"metrics.after_{key}_ci_low"], row[f"metrics.after_{key}_ci_high"]) == pytest.approx(
            (shown(low), shown(high)))
    assert row["metrics.after_knn_accuracy"] == pytest.approx(100 * run.metrics_after["knn_accuracy"])
    assert row["tags.contrastlab.units"].startswith("Figures in the unit the pages show them")
    assert not [key for key in row.index if key.startswith("metrics.eval_")]  # before and after are not sent twice
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri=reported["uri"])
    curve = client.get_metric_history(row["run_id"], "train_loss")
    assert [m.step for m in curve] == [p["step"] for p in run.losses]
    assert [m.value for m in curve] == pytest.approx([p["loss"] for p in run.losses])
    experiment = client.get_experiment(row["experiment_id"])
    assert experiment.name == "demo_corpus.csv" and experiment.artifact_location.startswith(home.resolve().as_uri())


def test_a_run_reported_to_tensorboard_holds_its_loss_curve_and_evaluations(reported):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = reported["run"]
    folder = reported["home"] / "tensorboard" / f"triplet_margin_0.1-{run.id}"  # named by the run's label (issue 51)
    events = EventAccumulator(str(folder))
    events.Reload()
    loss = events.Scalars("train/loss")
    assert [e.step for e in loss] == [p["step"] for p in run.losses] and len(loss) >= 2
    assert [e.value for e in loss] == pytest.approx([p["loss"] for p in run.losses])
    [after] = events.Scalars("after/polarity")
    assert after.value == pytest.approx(run.metrics_after["polarity"]) and after.step == run.losses[-1]["step"]
    assert {"before/knn_accuracy", "after/similarity_ci_high"} <= set(events.Tags()["scalars"])
    assert "contrastlab/settings/text_summary" in events.Tags()["tensors"]


@pytest.mark.parametrize(("value", "said"), [
    ("", "report_to is empty; give a value, or leave the setting out for its default (none)"),
    ("wandb", "report_to names 'wandb', which ContrastLab does not report to; use none, or a comma list of "
              "tensorboard, mlflow."),
    ("none,mlflow", "report_to gives none beside trackers"),
    ("mlflow,MLflow", "report_to names mlflow twice"),
    ("mlflow,", "report_to names an empty name"),
    ("ml flow", "report_to names 'ml flow'"),
    ("tensorboard\x00", "without line breaks or control characters"),
    ("é" * 5000, "which ContrastLab does not report to"),
])
def test_a_hostile_report_to_is_one_line_and_exit_2(value, said, tiny_model_dir, capsys):
    assert main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--report-to", value]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and said in err, err
    assert RunStore().list() == []


def test_a_config_file_that_gives_report_to_as_a_list_is_refused(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(f"corpus: {demo_corpus_path()}\nreport_to: [mlflow]\n")
    assert main(["train", "--config", str(config)]) == 2
    assert "report_to must be text" in capsys.readouterr().err


def test_an_unreachable_tracker_fails_the_run_before_it_trains(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(trackers.MLFLOW_URI_ENV, "nosuchscheme://lab-server")
    store = RunStore()
    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), report_to="mlflow")
    run_id = store.create("train", config.to_dict())
    worker.execute(store, run_id, job=lambda ctx: pytest.fail("trained although its tracker is unreachable"))
    run = store.get(run_id)
    assert run.status == "failed" and run.progress.get("user_error")
    assert run.error.startswith("Could not report to mlflow at nosuchscheme://lab-server (")
    assert run.error.endswith("fix it, or set report_to to none.") and "\n" not in run.error


def test_a_tracker_that_fails_midway_is_logged_and_the_run_goes_on(tiny_model_dir, monkeypatch):
    def broken(self, points):
        raise OSError("disk full")

    monkeypatch.setattr(trackers.TensorBoard, "losses", broken)
    store = RunStore()
    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), report_to="tensorboard")
    run_id = store.create("train", config.to_dict())

    def job(ctx):
        ctx.log_loss(1, 0.5)
        ctx.flush()
        ctx.log_loss(2, 0.25)
        return {"polarity": 50.0}

    worker.execute(store, run_id, job=job)
    run = store.get(run_id)
    assert run.status == "done" and [p["loss"] for p in run.losses] == [0.5, 0.25]
    log = (store.run_dir(run_id) / LOG_NAME).read_text()
    assert log.count("reporting to tensorboard failed, so the run stops reporting to it") == 1
    assert "OSError: disk full" in log


def test_a_cancelled_run_ends_killed_in_mlflow_with_what_it_logged(tiny_model_dir, monkeypatch, contrastlab_home):
    monkeypatch.delenv(trackers.MLFLOW_URI_ENV, raising=False)
    store = RunStore()
    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), report_to="mlflow")
    run_id = store.create("train", config.to_dict(), corpus_name="my corpus.csv")
    store.annotate(run_id, tags=["baseline", "σ-check"])

    def job(ctx):
        ctx.log_loss(1, 0.75)
        ctx.log_eval({"step": 1, "polarity": 61.5})
        raise Cancelled()

    worker.execute(store, run_id, job=job)
    assert store.get(run_id).status == "cancelled"
    [row] = [row for _i, row in _mlflow_runs(trackers.mlflow_uri()).iterrows()]
    assert row["status"] == "KILLED" and row["tags.contrastlab.tags"] == "baseline, σ-check"
    assert row["metrics.train_loss"] == 0.75 and row["metrics.eval_polarity"] == 61.5
    assert "metrics.after_polarity" not in row or row.isna()["metrics.after_polarity"]
    assert row["params.corpus.name"] == "my corpus.csv"


def test_the_train_page_offers_the_trackers(app, monkeypatch):
    monkeypatch.setattr(core.jobs.launch, "start", lambda store, run_id: 0)  # the run stays queued
    app.run()
    at = app.switch_page("app_pages/2_Train.py").run()
    choice = at.multiselect(key="train:report_to")
    assert choice.options == ["tensorboard", "mlflow"] and choice.value == []
    choice.set_value(["mlflow", "tensorboard"]).run()
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = RunStore().list()
    assert run.config["report_to"] == "tensorboard,mlflow"


def test_before_and_after_alone_are_two_points_not_a_curve():
    losses = [{"step": s, "loss": 1 / s} for s in range(1, 6)]
    two = loss_curve_figure(losses, [{"step": 0, "polarity": 50.0}, {"step": 5, "polarity": 60.0}])
    assert [t.mode for t in two.data] == ["lines", "markers"]
    three = loss_curve_figure(losses, [{"step": 0, "polarity": 50.0}, {"step": 2, "polarity": 55.0},
                                       {"step": 5, "polarity": 60.0}])
    assert [t.mode for t in three.data] == ["lines", "lines+markers"]


def test_report_to_is_where_a_run_is_reported_not_what_it_trained(tiny_model_dir):
    from core.runs.labels import differences

    store = RunStore()
    base = {"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir), "recipe": "triplet"}
    ids = [store.create("train", {**base, "report_to": value}) for value in ("none", "mlflow")]
    assert differences([store.get(i) for i in ids]) == {i: "" for i in ids}
    assert TrainConfig(**base).report_to == "none"


@pytest.fixture(autouse=True)
def http_bounds_restored(monkeypatch):
    """The MLflow request bounds that opening a tracker sets in this process (MLFLOW_HTTP) are taken back after each
    test, so each starts without them as a fresh worker does."""
    import os

    for name in trackers.MLFLOW_HTTP:
        monkeypatch.setenv(name, os.environ.get(name, ""))  # restored as they were when the test ends
        monkeypatch.delenv(name)


@pytest.fixture
def silent_server():
    """A loopback HTTP 'server' that accepts every connection and never answers: its URI."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held, stop = [], threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    for conn in held:
        conn.close()
    listener.close()


def _train_run(store: RunStore, tiny_model_dir) -> str:
    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), report_to="mlflow")
    return store.create("train", config.to_dict())


def test_a_tracking_server_that_never_answers_fails_the_run_in_one_line(tiny_model_dir, monkeypatch, silent_server):
    """Issue 51: such a server held a run at 'starting' for ten minutes (MLflow's 120 s a request, 7 retries). Its
    requests are bounded (MLFLOW_HTTP, 5 s and 2 retries); here a 1 s timeout of the user's own wins, for speed."""
    import time

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")
    monkeypatch.setenv(trackers.MLFLOW_URI_ENV, silent_server)
    store = RunStore()
    run_id = _train_run(store, tiny_model_dir)
    t0 = time.monotonic()
    worker.execute(store, run_id, job=lambda ctx: pytest.fail("trained although its tracker never answered"))
    run = store.get(run_id)
    assert time.monotonic() - t0 < 30
    assert run.status == "failed" and run.error.startswith(f"Could not report to mlflow at {silent_server} (")
    assert "\n" not in run.error
    import os

    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "1"  # the user's own setting was kept
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == trackers.MLFLOW_HTTP["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]


def test_a_cancel_ends_a_run_whose_tracker_never_answers(tiny_model_dir, monkeypatch, silent_server):
    import threading
    import time

    monkeypatch.setenv(trackers.MLFLOW_URI_ENV, silent_server)
    store = RunStore()
    run_id = _train_run(store, tiny_model_dir)
    ended = threading.Event()
    threading.Thread(target=lambda: (worker.execute(store, run_id, job=lambda ctx: pytest.fail("trained")),
                                     ended.set()), daemon=True).start()
    time.sleep(1.0)
    store.request_cancel(run_id)
    assert ended.wait(10), "the cancel did not end the run while its tracker was opening"
    assert store.get(run_id).status == "cancelled"


@pytest.mark.parametrize("uri", ["sqlite:///", "sqlite://", "SQLite:///:memory:"])
def test_an_in_memory_mlflow_store_is_refused(tiny_model_dir, monkeypatch, uri):
    """Issue 51: MLFLOW_TRACKING_URI=sqlite:/// is SQLAlchemy's in-memory database: the run ended done and nothing
    was kept anywhere."""
    monkeypatch.setenv(trackers.MLFLOW_URI_ENV, uri)
    store = RunStore()
    run_id = _train_run(store, tiny_model_dir)
    worker.execute(store, run_id, job=lambda ctx: pytest.fail("trained although nothing would be kept"))
    run = store.get(run_id)
    assert run.status == "failed"
    assert "is an in-memory store, so nothing the run reports to it would be kept" in run.error


def test_an_unreachable_tracking_server_fails_the_run_within_seconds(tiny_model_dir, monkeypatch):
    """Issue 51: a closed port gave 250 s of silence (7 retries backing off by a factor of 2) before the failure line;
    with MLFLOW_HTTP's bounds, about 3 s."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setenv(trackers.MLFLOW_URI_ENV, uri)
    store = RunStore()
    run_id = _train_run(store, tiny_model_dir)
    t0 = time.monotonic()
    worker.execute(store, run_id, job=lambda ctx: pytest.fail("trained although its tracker is unreachable"))
    assert time.monotonic() - t0 < 20
    assert store.get(run_id).error.startswith(f"Could not report to mlflow at {uri} (")


def test_two_first_runs_at_once_both_open_a_new_mlflow_store(tmp_path):
    """Issue 51: two runs that were the home's first to report to MLflow both migrated the new SQLite store, and one
    failed with "duplicate column name: step". The store is created under a file lock."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    barrier = tmp_path / "ready"
    barrier.mkdir()
    code = ("import os, sys, time; from core.runs import trackers; import mlflow.tracking; "  # imports done, then
            f"open(os.path.join({str(barrier)!r}, str(os.getpid())), 'w').close(); "  # both start at once
            f"[time.sleep(0.01) for _ in iter(lambda: len(os.listdir({str(barrier)!r})) < 2, False)]; "
            "trackers.mlflow_client(); print('opened')")
    env = {**os.environ, "CONTRASTLAB_HOME": str(tmp_path)}
    env.pop(trackers.MLFLOW_URI_ENV, None)
    root = Path(__file__).resolve().parents[1]
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-800:] for _out, err in outs]
    assert [out.strip() for out, _err in outs] == ["opened", "opened"]


def test_only_in_training_evaluations_are_eval_points_and_all_in_the_shown_unit(tiny_model_dir, monkeypatch):
    """Issue 51: eval_* repeated the before- and after-evaluation, which go as before_* and after_*; kNN accuracy
    went as a fraction beside P@k x 100."""
    import mlflow

    monkeypatch.delenv(trackers.MLFLOW_URI_ENV, raising=False)
    store = RunStore()
    run_id = _train_run(store, tiny_model_dir)

    def job(ctx):
        ctx.log_eval({"step": 0, "polarity": 50.0, "knn_accuracy": 0.5})  # before training
        ctx.log_eval({"step": 2, "polarity": 55.0, "knn_accuracy": 0.6})  # during it
        ctx.log_eval({"step": 4, "polarity": 60.0, "knn_accuracy": 0.7})  # after it: the job's result
        return {"polarity": 60.0, "knn_accuracy": 0.7}

    worker.execute(store, run_id, job=job)
    client = mlflow.tracking.MlflowClient(tracking_uri=trackers.mlflow_uri())
    [row] = [row for _i, row in _mlflow_runs(trackers.mlflow_uri()).iterrows()]
    history = client.get_metric_history(row["run_id"], "eval_knn_accuracy")
    assert [(m.step, m.value) for m in history] == [(2, pytest.approx(60.0))]
    assert row["metrics.after_knn_accuracy"] == pytest.approx(70.0) and row["metrics.after_polarity"] == 60.0
