"""Pre-warmed workers with real processes: a queued run goes to the waiting standby, an unused standby
times out and cleans up, and stop_all ends one even while it is still importing."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from core.errors import UserError
from core.jobs import launch, standby
from core.jobs.process import LOG_NAME
from core.runs.store import RunStore, pid_alive

IMPORT_TIMEOUT_S = 180  # a standby imports torch and sentence-transformers first: ~9 s idle, more when busy


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def _markers(store: RunStore) -> list[str]:
    return sorted(p.name for p in standby.folder(store).iterdir() if p.name != "standby.log")


@pytest.fixture
def store(contrastlab_home, monkeypatch) -> RunStore:
    monkeypatch.setenv("CONTRASTLAB_STANDBY_S", "60")
    store = RunStore(contrastlab_home)
    yield store
    standby.stop_all(store)


def _trained(store: RunStore, config: dict, pid: int) -> dict:
    """The weights a train run handed to the ready standby `pid` saved."""
    from safetensors.torch import load_file

    _wait(lambda: standby.waiting(store), 30, "the worker back on standby")
    run_id = store.create("train", config)
    assert launch.start(store, run_id) == pid
    _wait(lambda: not store.get(run_id).active, IMPORT_TIMEOUT_S, "the run to end")
    run = store.get(run_id)
    assert run.status == "done", run.error
    return load_file(Path(run.artefacts["model"]) / "model.safetensors")


def test_a_queued_run_goes_to_the_ready_standby_which_is_back_on_standby_after_it(store, tiny_model_dir):
    pid = standby.ensure(store)
    assert standby.ensure(store) == pid  # still importing: counted, no second process
    _wait(lambda: (standby.folder(store) / f"{pid}.ready").exists(), IMPORT_TIMEOUT_S, "the standby to be ready")

    run_id = store.create("wait", {"steps": 30, "step_s": 0.05})
    assert launch.start(store, run_id) == pid
    _wait(lambda: store.get(run_id).status == "running", 30, "the run to start")
    assert _markers(store) == [f"{pid}.busy"] and standby.ensure(store) == pid  # no second standby beside the run
    beside = store.create("wait", {"steps": 1, "step_s": 0.01})
    assert launch.start(store, beside) != pid  # a busy standby takes no hand-over: the run gets its own worker
    _wait(lambda: store.get(run_id).status == "done", 60, "the run to finish")
    run = store.get(run_id)
    assert run.pid == pid and Path(run.artefacts["result"]).is_file()
    log = store.run_dir(run_id) / LOG_NAME  # the worker says "ended done" just after recording it (seen in a run)
    _wait(lambda: "ended done" in log.read_text(), 30, "the worker's last line")
    assert f"pid {pid} executing run {run_id}" in log.read_text()

    _wait(lambda: standby.waiting(store), 30, "the worker to be back on standby")
    assert _markers(store) == [f"{pid}.ready"] and pid_alive(pid)
    assert f"pid {pid} back on standby after run {run_id}" in (standby.folder(store) / "standby.log").read_text()
    # The next runs execute in the process that executed the last: nothing of a run may carry over (seeds, thread
    # counts, caches, hooks), so the same config trains the same weights twice, and they are trained ones.
    import torch
    from safetensors.torch import load_file

    from core.data.corpus import demo_corpus_path
    from core.training.config import TrainConfig

    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), examples=32, batch_size=16,
                         epochs=1, threshold=0.0, device="cpu").to_dict()
    first, second = (_trained(store, config, pid) for _ in range(2))
    base = load_file(tiny_model_dir / "model.safetensors")
    assert first.keys() == second.keys() and all(torch.equal(first[name], second[name]) for name in first)
    assert any(not torch.equal(first[name], base[name]) for name in base if name in first)

    _wait(lambda: standby.waiting(store), 30, "the worker back on standby")
    again = store.create("wait", {"steps": 2, "step_s": 0.01, "fail": True})
    assert launch.start(store, again) == pid  # the same process, imports done
    _wait(lambda: not pid_alive(pid), 60, "the worker to exit after a run that failed")
    assert store.get(again).status == "failed" and _markers(store) == []
    assert f"pid {pid} executing run {again}" in (store.run_dir(again) / LOG_NAME).read_text()

    fresh = store.create("wait", {"steps": 1, "step_s": 0.01})  # none waiting now: a new worker takes it
    assert launch.start(store, fresh) != pid


def test_a_run_started_while_the_standby_imports_waits_for_it(store):
    pid = standby.ensure(store)
    run_id = store.create("wait", {"steps": 2, "step_s": 0.01})
    assert launch.start(store, run_id) == pid  # sooner than a fresh process, which would import as well
    assert (standby.folder(store) / f"{pid}.taken").exists()
    _wait(lambda: store.get(run_id).status == "done", IMPORT_TIMEOUT_S, "the run to finish")
    assert store.get(run_id).pid == pid


def test_an_unused_standby_times_out_and_cleans_up(store, monkeypatch):
    monkeypatch.setenv("CONTRASTLAB_STANDBY_S", "0.5")
    pid = standby.ensure(store)
    _wait(lambda: not pid_alive(pid), IMPORT_TIMEOUT_S, "the idle standby to exit")
    assert _markers(store) == []
    assert f"pid {pid} left standby unused" in (standby.folder(store) / "standby.log").read_text()
    assert standby.hand_over(store, store.create("wait", {})) is None


def test_stop_all_ends_a_standby_while_it_imports(store):
    pid = standby.ensure(store)
    assert standby.stop_all(store) == [pid]
    _wait(lambda: not pid_alive(pid), 30, "the stopped standby to exit")
    assert standby.ensure(store) != pid  # the stopped one no longer counts


def test_a_marker_left_by_a_killed_standby_is_ignored(store):
    import os

    stale = standby.folder(store) / f"{os.getpid()}.ready"  # a live pid, but not a standby (pid reuse)
    stale.touch()
    assert standby.hand_over(store, store.create("wait", {})) is None and not stale.exists()


def test_standbys_off_and_none_started_beside_an_active_run(store, monkeypatch):
    store.create("wait", {})  # queued: it would compete with a standby's imports
    assert standby.ensure(store) is None and _markers(store) == []
    monkeypatch.setenv("CONTRASTLAB_STANDBY_S", "0")
    assert standby.ensure(store) is None


def test_a_standby_forked_but_not_yet_started_counts_as_one():
    """Between fork and exec a new standby's /proc cmdline is still its parent's: it must not be taken for a dead
    standby whose pid was reused (stop_all then missed a standby started a moment before, under load)."""
    child = os.fork()
    if child == 0:  # the child stands for a spawn that has not exec'd yet
        time.sleep(5)
        os._exit(0)
    try:
        assert standby._is_standby(child)
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    assert not standby._is_standby(child)


def test_a_standby_in_the_middle_of_its_exec_counts_as_one(store, monkeypatch):
    """Once its exec is committed, spawn() returns while the new program's arguments are not yet in place: /proc shows
    an empty cmdline for a moment. A second `ensure` then removed the new standby's marker and started another (CI,
    load 6)."""
    pid = standby.ensure(store)
    real = standby._command
    monkeypatch.setattr(standby, "_command", lambda p: [b""] if p == pid else real(p))
    assert standby.ensure(store) == pid and _markers(store) == [f"{pid}.warming"]


@pytest.mark.parametrize("command", [["train", "--recipe", "triplet"], ["quick", "--margin", "0.5"]])
def test_a_cli_run_starts_its_worker_before_checking_its_inputs(store, monkeypatch, tiny_model_dir, command):
    """Its imports (6-7 s) overlap the call's own checks, which took 6.5 s before a quick run on the demo corpus was
    handed over. It does not leave with the CLI process: a refused call leaves it for the next one."""
    from core.cli import main, training
    from core.data.corpus import demo_corpus_path
    from core.errors import UserError

    seen = []

    def check(cfg):
        seen.append(_markers(store))
        raise UserError("refused by the test")

    monkeypatch.setattr(training, "_check_inputs", check)
    assert main([command[0], str(demo_corpus_path()), "--model", str(tiny_model_dir), *command[1:]]) == 2
    [markers] = seen
    [marker] = [name for name in markers if name.endswith((".warming", ".ready"))]
    assert (standby.folder(store) / marker).read_text() == ""  # no parent recorded: detached


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1", "1e999", "9" * 5000, "[60]", "60 s"])
def test_a_bad_standby_wait_is_one_line_and_serve_refuses_it(value, monkeypatch, capsys, contrastlab_home):
    from core import cli

    monkeypatch.setenv("CONTRASTLAB_STANDBY_S", value)
    with pytest.raises(UserError, match="CONTRASTLAB_STANDBY_S must be the seconds") as exc:
        standby.ensure(RunStore(contrastlab_home))
    assert len(str(exc.value).splitlines()) == 1
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: CONTRASTLAB_STANDBY_S must be") and len(err.strip().splitlines()) == 1


def test_serve_refuses_to_run_with_warm_workers_turned_off(monkeypatch, capsys, contrastlab_home):
    from core import cli

    for value in ("0", " 0.0 "):
        monkeypatch.setenv("CONTRASTLAB_STANDBY_S", value)
        assert standby.idle_s() == 0 and standby.ensure(RunStore(contrastlab_home)) is None
        assert cli.main(["serve"]) == 2
        assert "turns warm workers off" in capsys.readouterr().err
    monkeypatch.setenv("CONTRASTLAB_STANDBY_S", "")
    assert standby.idle_s() == standby.DEFAULT_IDLE_S



def _waiting(marker: dict[str, Path], wait_s: float) -> list:
    """standby's wait for a run id in a thread: [] until it returns, then [its return]."""
    import threading

    out: list = []
    threading.Thread(target=lambda: out.append(standby._wait_for_run(marker, wait_s)), daemon=True).start()
    return out


def test_a_standby_whose_home_was_removed_leaves_at_its_deadline(tmp_path):
    """Issue 51: a standby on a temporary home that was then deleted found none of its markers at its deadline, so it
    moved the deadline on by 10 s for ever, a 0.75 GB worker alive minutes later. It has been stopped, and leaves."""
    import shutil

    where = tmp_path / "home" / "standby"
    where.mkdir(parents=True)
    marker = {state: where / f"123.{state}" for state in (*standby.STATES, "run")}
    marker["ready"].touch()
    shutil.rmtree(tmp_path / "home")
    out = _waiting(marker, 0.2)
    _wait(lambda: out, 5, "the standby without a home to leave")
    assert out == [None]


@pytest.mark.parametrize("held", ["taken", "busy"])
def test_a_standby_held_by_a_hand_over_waits_past_its_deadline_for_the_run(tmp_path, held):
    where = tmp_path / "standby"
    where.mkdir()
    marker = {state: where / f"123.{state}" for state in (*standby.STATES, "run")}
    marker[held].touch()
    out = _waiting(marker, 0.1)
    time.sleep(1.0)
    assert out == []  # past its deadline, still waiting: the run id follows the hand-over
    marker["taken"].touch()
    marker["run"].write_text("run-1", encoding="utf-8")
    _wait(lambda: out, 20, "the run id to be read")
    assert out == ["run-1"] and marker["busy"].exists()
