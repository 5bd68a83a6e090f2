"""`--foreground` (train, crop, sweep): the run executes in a thread of the CLI's own process, with no worker process
started; it is recorded as any run is, stdout stays one JSON object, a cancel request ends it as cancelled (exit
130), and a run over several processes is refused with one line."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from core.cli import main
from core.data.corpus import demo_corpus_path
from core.jobs import launch, process, standby
from core.runs.store import RunStore

TINY = ["--examples", "16", "--batch-size", "8", "--device", "cpu"]


@pytest.fixture
def no_processes(monkeypatch):
    """Any worker or standby started fails the test."""
    def refuse(*_args, **_kwargs):
        pytest.fail("a foreground run started a process")

    for module in (launch, process, standby):
        monkeypatch.setattr(module, "spawn", refuse)


def test_a_foreground_run_is_recorded_in_this_process_and_prints_one_json_object(tiny_model_dir, no_processes,
                                                                                  capsys):
    code = main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), *TINY, "--json", "--foreground"])
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads(out)  # the trainer's own lines went to stderr
    [run] = RunStore().list()
    assert (run.id, run.status, run.pid) == (result["run_id"], "done", os.getpid())
    assert result["after"]["polarity"] == run.metrics_after["polarity"] and (run.artefacts["model"])


def test_a_foreground_sweep_trains_its_runs_here(tiny_model_dir, no_processes, capsys):
    code = main(["sweep", str(demo_corpus_path()), "--model", str(tiny_model_dir), *TINY, "--margins", "0.1,0.5",
                 "--json", "--foreground"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "done"
    assert sorted((r["margin"], r["status"]) for r in result["runs"]) == [(0.1, "done"), (0.5, "done")]


def test_a_cancel_request_ends_a_foreground_run_as_cancelled(tiny_model_dir, no_processes, capsys):
    """As from the Train page or `python -m core cancel`: the run stops at its next step and the CLI exits 130."""
    store = RunStore()

    def cancel_once_training() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            runs = store.list(with_losses=False)
            if runs and runs[0].progress.get("phase") == "training" and (runs[0].progress.get("step") or 0) >= 1:
                store.request_cancel(runs[0].id)
                return
            time.sleep(0.1)

    canceller = threading.Thread(target=cancel_once_training, daemon=True)
    canceller.start()
    code = main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), *TINY, "--max-steps", "100000",
                 "--foreground"])
    canceller.join(timeout=5)
    [run] = store.list()
    assert code == 130 and run.status == "cancelled", (code, run.status, run.error)
    assert not (store.run_dir(run.id) / "model").exists()


@pytest.mark.parametrize("flags,message", [
    (["--nproc", "2", "--oversubscribe"], "--foreground runs the run in this process"),
    (["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", "29999"], "--foreground runs the run in this"),
])
def test_foreground_refusals_are_one_line_and_create_no_run(tiny_model_dir, flags, message, capsys):
    code = main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), *TINY, "--foreground", *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert RunStore().list() == []


@pytest.mark.parametrize("flag", ["--foreground=yes", "--foreground="])
def test_foreground_takes_no_value(tiny_model_dir, flag, capsys):
    with pytest.raises(SystemExit) as exited:  # argparse: its usage and one error line
        main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), flag])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "argument --foreground: ignored explicit argument" in err, err
    assert RunStore().list() == []
