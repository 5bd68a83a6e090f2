"""Issue 12, runs and the CLI: a worker that dies (SIGKILL, out of memory) ends its run as failed for every
follower (CLI, Train page) instead of leaving them waiting; Ctrl-C prints the before metrics already measured;
the CLI prints the corpus report's warnings; bad `evaluate --k` exits 2 with one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import core.jobs.launch
from core.cli import COMMANDS, main
from core.cli.training import follow
from core.data.corpus import demo_corpus_path
from core.runs.store import TMP_NAME, RunStore, pid_alive
from tests.conftest import interruptible

REPO = Path(__file__).resolve().parents[1]
# Enough steps that the run is still training when it is killed or interrupted (it never gets near the end).
LONG_TRAINING = ("--examples", "2000", "--epochs", "50", "--batch-size", "16")


def dead_pid() -> int:
    """The pid of a process that has exited and been waited for."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def start_cli(home: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, CONTRASTLAB_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "core", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)


def wait_training(store: RunStore, cli: subprocess.Popen, timeout: float = 240.0):
    """The CLI's run once its worker is training (the before metrics are measured by then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert cli.poll() is None, cli.communicate()
        runs = store.list(with_losses=False)
        if runs and runs[0].status == "running" and runs[0].progress.get("phase") == "training" \
                and runs[0].progress.get("step"):
            return runs[0]
        time.sleep(0.2)
    cli.kill()
    raise AssertionError(f"the run did not reach training: {cli.communicate()}")


# --- a dead worker ---------------------------------------------------------------------------------------------

def test_follower_fails_a_run_whose_worker_is_gone(monkeypatch):
    store = RunStore()
    run_id = store.create("wait", {"steps": 1000})
    pid = dead_pid()
    (store.run_dir(run_id) / TMP_NAME / "trainer").mkdir(parents=True)  # what a killed training leaves
    monkeypatch.setattr(core.jobs.launch, "start", lambda s, r: s.claim(r, pid) and s.mark_running(r, pid) and pid)
    ended: list = []
    follower = threading.Thread(target=lambda: ended.append(follow(store, run_id)), daemon=True)
    follower.start()
    follower.join(timeout=5)
    assert ended, "the follower still waits for a dead worker"
    run = ended[0]
    assert run.status == "failed" and f"pid {pid}" in run.error and "without reporting" in run.error
    assert not (store.run_dir(run_id) / TMP_NAME).exists()


def test_a_recorded_exit_names_the_signal():
    store = RunStore()
    run_id = store.create("wait", {"steps": 1000, "step_s": 0.02})
    pid = core.jobs.launch.start(store, run_id)  # a worker process this one started, and waits for
    os.kill(pid, signal.SIGKILL)
    run = core.jobs.launch.poll(store, run_id)
    deadline = time.monotonic() + 5
    while run.active and time.monotonic() < deadline:
        run = core.jobs.launch.poll(store, run_id)
    assert run.status == "failed" and "killed by signal 9 (SIGKILL)" in run.error, run.error


def test_cli_exits_when_its_worker_is_killed(tiny_model_dir, contrastlab_home, tmp_path):
    store = RunStore(contrastlab_home)
    cli = start_cli(contrastlab_home, "train", str(demo_corpus_path()), "--model", str(tiny_model_dir), *LONG_TRAINING)
    run = wait_training(store, cli)
    assert (store.run_dir(run.id) / TMP_NAME).is_dir()
    os.kill(run.pid, signal.SIGKILL)
    t0 = time.monotonic()
    try:
        _out, err = cli.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        cli.kill()
        raise AssertionError(f"the CLI still follows a dead worker: {cli.communicate()}") from None
    assert time.monotonic() - t0 < 10
    assert cli.returncode not in (0, None)
    assert len(error_lines(err)) == 1 and "Traceback" not in err, err
    assert "killed by signal 9" in error_lines(err)[0]
    run = store.get(run.id)
    assert run.status == "failed" and "killed by signal 9" in run.error
    assert not (store.run_dir(run.id) / TMP_NAME).exists()
    assert main(["export", run.id, "--out", str(tmp_path / "export")]) == 2
    assert not (tmp_path / "export").exists()


def test_train_page_shows_a_dead_workers_run_as_failed(app):
    store = RunStore()
    run_id = store.create("train", {"corpus": str(demo_corpus_path())})
    pid = dead_pid()
    store.claim(run_id, pid)
    store.mark_running(run_id, pid)
    app.query_params["run"] = run_id
    app.run()
    at = app.switch_page("app_pages/2_Train.py").run()
    assert not at.exception
    assert store.get(run_id).status == "failed"
    assert [e.value for e in at.error] == [f"The run failed: {store.get(run_id).error}"]
    assert any("badge[:material/error: failed]" in m.value for m in at.markdown)


# --- Ctrl-C ------------------------------------------------------------------------------------------------------

def test_ctrl_c_prints_the_before_metrics(tiny_model_dir, contrastlab_home):
    store = RunStore(contrastlab_home)
    cli = start_cli(contrastlab_home, "train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json",
                    *LONG_TRAINING)
    run = wait_training(store, cli)
    cli.send_signal(signal.SIGINT)
    try:
        out, err = cli.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        cli.kill()
        raise
    assert "Traceback" not in err, err
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert result["before"] == run.progress["metrics_before"] and result["before"]["polarity"] is not None
    assert result["after"] is None


def test_ctrl_c_outside_a_run_is_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(COMMANDS, "runs", (interrupted, print))
    assert main(["runs"]) == 130
    err = capsys.readouterr().err
    assert len(error_lines(err)) == 1 and err.count("\n") == 1, err


# --- SIGTERM, and runs that end cancelled (issue 26) -------------------------------------------------------------

# Each case takes about 11 s on 2 cores: make test runs the sweep and one train (the other signal target);
# make test-all runs all four.
@pytest.mark.parametrize("command,target", [
    ("sweep", "cli"), ("train", "worker"),
    pytest.param("sweep", "worker", marks=pytest.mark.slow), pytest.param("train", "cli", marks=pytest.mark.slow)])
def test_a_run_stopped_by_sigterm_exits_as_interrupted_with_its_status(command, target, tiny_model_dir,
                                                                       contrastlab_home):
    """`kill` of the run's worker cancels the run; `kill` of the CLI cancels it as Ctrl-C does (never leaves it
    training on its own). Either way the CLI prints the cancelled status and exits 130, a sweep as a train run."""
    store = RunStore(contrastlab_home)
    grid = ["--margins", "0.1,0.2"] if command == "sweep" else []
    cli = start_cli(contrastlab_home, command, str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json",
                    *grid, *LONG_TRAINING)
    wait_training(store, cli)
    run = next(r for r in store.list(with_losses=False) if r.kind == command)
    if target == "worker":
        os.kill(run.pid, signal.SIGTERM)
    else:
        cli.send_signal(signal.SIGTERM)
    try:
        out, err = cli.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        cli.kill()
        raise
    assert cli.returncode == 130 and "Traceback" not in err, err
    result = json.loads(out)
    assert result["status"] == "cancelled" and store.get(run.id).status == "cancelled"
    if command == "sweep":
        assert [c["status"] for c in result["runs"]] == ["cancelled"]
    deadline = time.monotonic() + 15
    while pid_alive(run.pid):
        assert time.monotonic() < deadline, "the worker outlived its cancelled run"
        time.sleep(0.2)


def test_a_command_whose_run_ended_cancelled_prints_it_and_exits_130(monkeypatch, capsys):
    monkeypatch.setitem(COMMANDS, "runs", (lambda args: {"status": "cancelled"}, lambda r: print(r["status"])))
    assert main(["runs"]) == 130
    assert capsys.readouterr().out == "cancelled\n"
    monkeypatch.setitem(COMMANDS, "runs", (lambda args: {"status": "done"}, lambda r: print(r["status"])))
    assert main(["runs"]) == 0


# --- the corpus report's warnings; evaluate --k -----------------------------------------------------------------

@pytest.fixture
def warned_corpus(tmp_path) -> Path:
    """A corpus whose report warns twice: one text with two labels, and rows of an unknown split value (32 test texts:
    enough not to be warned of as too few)."""
    rows = [f"sentence {i} about topic {i % 2},{'ab'[i % 2]},{'test' if i % 5 == 0 else 'train'}" for i in range(160)]
    rows += ["sentence 1 about topic 1,a,train", "odd one,a,dev2", "odd two,b,dev2"]
    path = tmp_path / "warned.csv"
    path.write_text("text,label,split\n" + "\n".join(rows) + "\n")
    return path


def warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


@pytest.mark.parametrize("command", ["evaluate", "layers"])
def test_evaluate_and_layers_print_the_corpus_warnings(command, warned_corpus, tiny_model_dir, capsys):
    assert main([command, str(warned_corpus), "--model", str(tiny_model_dir), "--json"]) == 0
    warned = warnings_of(capsys.readouterr().err)
    assert len(warned) == 2, warned
    assert "different labels" in warned[0] and "2 'dev2'" in warned[1]


def test_train_prints_the_corpus_warnings(warned_corpus, tiny_model_dir, monkeypatch, capsys):
    monkeypatch.setattr(core.jobs.launch, "start", lambda store, run_id: store.request_cancel(run_id) or 0)
    assert main(["train", str(warned_corpus), "--model", str(tiny_model_dir), "--json"]) == 130  # cancelled: as
    captured = capsys.readouterr()  # an interrupted command exits (issue 26)
    assert len(warnings_of(captured.err)) == 2 and json.loads(captured.out)["status"] == "cancelled"


@pytest.mark.parametrize("k", ["0", "-3", "1.5", "many"])
def test_evaluate_bad_k_exits_2_with_one_line(k, tiny_model_dir, capsys):
    assert main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--k", k]) == 2
    err = capsys.readouterr().err
    assert error_lines(err) == [f"error: k must be a whole number in [1, 1000], got '{k}'"], err


def test_a_closed_output_pipe_ends_the_cli_quietly(contrastlab_home):
    """`python -m core runs | head -1`: the reader closed the pipe, so there is no traceback and the exit is 0."""
    store = RunStore()
    for _ in range(3):
        store.create("train", {"recipe": "mgh", "order": "random", "corpus": "c.csv"})
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the CLI writes a byte
    env = {**os.environ, "CONTRASTLAB_HOME": str(contrastlab_home), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "core", "runs"], cwd=REPO, env=env, stdout=write,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    os.close(write)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
