"""More training processes on a machine than its cores (or GPUs) is refused unless --oversubscribe (issue 33):
a config's `nproc: 64` started 64 trainers on a 2-core machine."""

from __future__ import annotations

import os

import pytest

import core.models.loading as loading
from core.cli import main
from core.cli.training import _check_processes
from core.errors import UserError
from core.runs.store import RunStore
from core.storage import ASSETS

DEMO = str(ASSETS / "demo_corpus.csv")


@pytest.fixture
def machine(monkeypatch):
    """A 2-core machine with `gpus` GPUs."""
    state = {"gpus": 0}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(loading, "visible_gpus", lambda: state["gpus"])
    return state


@pytest.mark.parametrize("how", ["flag", "config"])
def test_more_processes_than_cores_exits_2_before_a_run_row(how, machine, tmp_path, capsys):
    if how == "flag":
        argv = ["train", DEMO, "--nproc", "3"]
    else:
        config = tmp_path / "run.yaml"
        config.write_text(f"corpus: {DEMO}\nnproc: 64\n")
        argv = ["train", "--config", str(config)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "2 CPU cores" in err and "--oversubscribe" in err, err
    assert RunStore().list() == []


def test_the_limit_is_the_gpus_on_a_gpu_machine_and_the_cores_on_its_cpu(machine):
    machine["gpus"] = 1
    with pytest.raises(UserError, match="1 GPUs"):
        _check_processes(2, None, oversubscribe=False)
    _check_processes(2, "cpu", oversubscribe=False)  # a CPU run on that machine: its 2 cores
    with pytest.raises(UserError, match="2 CPU cores"):
        _check_processes(3, " CPU ", oversubscribe=False)
    machine["gpus"] = 4
    _check_processes(4, "cuda", oversubscribe=False)
    _check_processes(64, None, oversubscribe=True)
    _check_processes(1, None, oversubscribe=False)
