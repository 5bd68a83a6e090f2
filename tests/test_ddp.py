"""Distributed training (PyTorch DDP through torchrun) on the CPU with gloo, world size 2, the tiny model: a run trains
and is recorded once by rank 0 with the same before-metrics and examples as a single process; cancel stops every
rank at the same step (and a run still waiting for another machine); a killed rank fails the run, naming it, and
leaves no process behind, as does a killed launcher; rank 0's own error is the run's; bad launch flags are one
line."""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from core.cli import main
from core.data.corpus import demo_corpus_path
from core.errors import UserError
from core.jobs import ddp, launch
from core.jobs.process import LOG_NAME
from core.runs.store import RunStore, pid_alive
from core.training.config import TrainConfig
from core.training.trainer import total_steps
from tests.conftest import train_runs

RUN_TIMEOUT_S = 240  # two ranks import torch and sentence-transformers on busy cores first
STOP_TIMEOUT_S = 60  # a hang would last DDP's collective timeout (hours); this only catches that
SETTINGS = {"nproc": 2, "examples": 64, "batch_size": 8, "epochs": 2, "lr": 5e-3, "warmup_ratio": 0.0,
            "threshold": 0.0, "device": "cpu"}


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def _config(model_dir: Path, **settings) -> dict:
    return TrainConfig(corpus=str(demo_corpus_path()), model=str(model_dir), **{**SETTINGS, **settings}).to_dict()


def _ranks(store: RunStore, run_id: str) -> dict[int, int]:
    """rank -> pid, from the lines each rank writes to worker.log as it joins the process group."""
    log = (store.run_dir(run_id) / LOG_NAME).read_text(errors="replace")
    return {int(r): int(p) for r, p in re.findall(r"\[rank (\d+)\] pid (\d+)", log)}


def _training(store: RunStore, run_id: str) -> bool:
    run = store.get(run_id)
    assert run.active, (run.status, run.error)
    return run.progress.get("phase") == "training" and (run.progress.get("step") or 0) >= 1


def _all_gone(pids) -> bool:
    return not any(pid_alive(pid) for pid in pids)


def _kill_launchers(pids) -> None:
    """Launchers a failed test left running: killed, and their ranks leave on their own."""
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _free_port() -> int:
    """A free port below the kernel's ephemeral range: the single-node runs beside it (torchrun --standalone, gloo)
    bind ephemeral ports, and one of them once took a port picked with bind(0) and let go before the launcher bound it
    (EADDRINUSE in a fresh clone's CI)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    below = range(20000, low) if low - 20000 >= 200 else range(10000, 20000)  # a system whose range starts low
    for port in random.Random(os.getpid()).sample(below, 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


@pytest.fixture(scope="module")
def long_runs(tiny_model_dir, tmp_path_factory):
    """Runs started together so that their imports overlap: two over 2 processes that would take hours (10^6
    steps), cancelled and killed once both train; node 0 of a run over 2 machines whose other node never comes,
    cancelled while it waits; and one whose mining finds nothing on rank 0. Started after ddp_run, not before it:
    once the two endless runs train, their 4 ranks keep every core busy, and ddp_run's run then took 70-110 s on
    2 cores instead of about 15."""
    store = RunStore(tmp_path_factory.mktemp("long-home"))
    ids = [store.create("train", _config(tiny_model_dir, max_steps=10**6)) for _ in range(2)]  # until cancelled
    waiting = store.create("train", _config(tiny_model_dir, nproc=1, nnodes=2))
    no_examples = store.create("train", _config(tiny_model_dir, examples=16, threshold=1.0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTRASTLAB_HOME", str(store.root))  # their caches too (a module fixture precedes the home's)
        pids = [launch.start(store, run_id) for run_id in (*ids, no_examples)]
        pids.append(launch.start(store, waiting, ddp.Rendezvous("127.0.0.1", _free_port(), 0)))
    yield store, [*ids, waiting, no_examples], pids
    _kill_launchers(pids)


# --- a run over two processes -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp_run(tiny_model_dir, tmp_path_factory):
    """One run over 2 processes, started by the CLI as a user would, with evaluations during training; and a
    single-process run of the same settings in another home (no shared cache), to compare with."""
    home = tmp_path_factory.mktemp("ddp-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTRASTLAB_HOME", str(home))
        args = ["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--eval-every", "3", "--json",
                *(f"--{k.replace('_', '-')}={v}" for k, v in SETTINGS.items())]
        code = main(args)
        assert code == 0, (home / "runs.sqlite").exists() and [r.error for r in RunStore(home).list()]
    single_home = tmp_path_factory.mktemp("single-home")
    (single_id,) = train_runs(single_home, [_config(tiny_model_dir, eval_every=3, nproc=1)])
    return RunStore(home), RunStore(single_home).get(single_id)


def test_ddp_run_trains_and_rank_0_records_it_once(ddp_run):
    store, _single = ddp_run
    [run] = store.list()  # one run row: the other rank never created one
    assert run.status == "done", run.error
    summary = run.progress["summary"]
    assert summary["world_size"] == 2 and summary["effective_batch_size"] == 16
    assert summary["steps"] == 8  # 64 examples / (8 x 2) an epoch, 2 epochs
    assert total_steps(TrainConfig.from_dict(run.config), 64) == 8  # what the ETA and warm-up count with
    losses = [p["loss"] for p in run.losses]
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) < sum(losses[:3]), losses  # the loss goes down
    assert [p["step"] for p in run.history] == [0, 3, 6, 8]  # before, in training on rank 0, after: each once
    assert run.metrics_after["polarity"] == run.history[-1]["polarity"]
    assert run.pid is not None  # the launcher, which exits once torchrun has stopped the ranks after the result
    _wait(lambda: not pid_alive(run.pid), STOP_TIMEOUT_S, "the launcher to exit")


def test_ddp_run_saves_exactly_one_model_that_loads(ddp_run):
    from sentence_transformers import SentenceTransformer

    store, _single = ddp_run
    [run] = store.list()
    assert sorted(p.name for p in store.run_dir(run.id).iterdir()) == ["model", LOG_NAME]  # no .tmp left
    saved = sorted(store.root.rglob("model.safetensors"))
    assert saved == [Path(run.artefacts["model"]) / "model.safetensors"]  # no second rank wrote a model anywhere
    model = SentenceTransformer(run.artefacts["model"], device="cpu")
    assert model.encode(["the film was good"]).shape == (1, 32)
    card = (Path(run.artefacts["model"]) / "README.md").read_text()
    assert "effective batch 16 (8 per process x 2 processes" in card


def test_ddp_before_metrics_and_examples_equal_a_single_process_run(ddp_run):
    store, single = ddp_run
    [run] = store.list()
    before = {k: v for k, v in run.before.items() if isinstance(v, float)}
    assert before and before == pytest.approx({k: single.before[k] for k in before}, rel=1e-9, abs=1e-9)
    assert run.progress["summary"]["examples"] == single.progress["summary"]["examples"]
    # both ranks trained on the rows a single process mines, in the same order
    from core.data.corpus import load_corpus
    from core.models.loading import load_model
    from core.training.distributed import examples_digest
    from core.training.recipes import get_recipe

    cfg = TrainConfig.from_dict(run.config)
    dataset, _stats = get_recipe("triplet").build_examples(cfg, load_corpus(cfg.corpus), load_model(cfg.model, "cpu"))
    log = (store.run_dir(run.id) / LOG_NAME).read_text(errors="replace")
    digests = dict(re.findall(r"\[rank (\d)\] 64 examples, digest (\w+)", log))
    assert digests == {"0": examples_digest(dataset), "1": examples_digest(dataset)}, log[-2000:]


# --- cancel and a dying rank --------------------------------------------------------------------------------------


def test_cancel_stops_every_rank_and_a_killed_rank_fails_the_run(long_runs):
    store, (cancelled, killed, waiting, _no_examples), launchers = long_runs
    _wait(lambda: _training(store, cancelled) and _training(store, killed), RUN_TIMEOUT_S, "both runs to train")
    run = store.get(waiting)
    assert (run.status, run.progress["phase"]) == ("queued", "starting 1 process(es), waiting for 1 other node(s)")
    assert pid_alive(launchers[3])

    store.request_cancel(cancelled)
    store.request_cancel(waiting)
    ranks = _ranks(store, killed)
    os.kill(ranks[1], signal.SIGKILL)
    _wait(lambda: not any(store.get(r).active for r in (cancelled, killed, waiting)), STOP_TIMEOUT_S,
          "the runs to end")
    assert store.get(waiting).status == "cancelled"

    run = store.get(cancelled)
    assert run.status == "cancelled", run.error
    log = (store.run_dir(cancelled) / LOG_NAME).read_text(errors="replace")
    stops = dict(re.findall(r"\[rank (\d)\] training ended at step (\d+)", log))
    assert set(stops) == {"0", "1"} and len(set(stops.values())) == 1, log[-3000:]  # both, at the same step
    assert not (store.run_dir(cancelled) / "model").exists()

    run = store.get(killed)
    assert run.status == "failed"
    assert run.error.startswith(f"Rank 1 of 2 (pid {ranks[1]}) was killed by signal 9 (SIGKILL)"), run.error
    assert not (store.run_dir(killed) / "model").exists() and not (store.run_dir(killed) / ".tmp").exists()

    pids = [*launchers, *_ranks(store, cancelled).values(), *ranks.values()]
    _wait(lambda: _all_gone(pids), STOP_TIMEOUT_S, "every process of both runs to exit")


def test_an_error_on_rank_0_fails_the_run_with_its_own_message(long_runs):
    store, (*_others, no_examples), launchers = long_runs
    _wait(lambda: not store.get(no_examples).active, RUN_TIMEOUT_S, "the run to fail")
    run = store.get(no_examples)
    assert run.status == "failed" and run.progress.get("user_error") is True  # the CLI exits 2
    assert run.error.startswith("Mining found no triplet examples at cosine threshold 1.0"), run.error
    _wait(lambda: _all_gone([launchers[2], *_ranks(store, no_examples).values()]), STOP_TIMEOUT_S,
          "its processes to exit")


def test_a_rank_that_loses_its_launcher_leaves(tiny_model_dir, contrastlab_home):
    """The launcher killed with SIGKILL cannot stop its ranks: they notice and leave; the run is failed."""
    store = RunStore(contrastlab_home)
    run_id = store.create("train", _config(tiny_model_dir))
    pid = launch.start(store, run_id)
    try:
        _wait(lambda: len(_ranks(store, run_id)) == 2, RUN_TIMEOUT_S, "both ranks to start")
    finally:
        os.kill(pid, signal.SIGKILL)
    ranks = _ranks(store, run_id).values()
    _wait(lambda: _all_gone([pid, *ranks]), STOP_TIMEOUT_S, "the ranks to leave")
    run = launch.poll(store, run_id)
    assert run.status == "failed" and f"pid {pid}" in run.error and "signal 9" in run.error, run.error


# --- settings, flags and failure reports (no processes) ---------------------------------------------------------


@pytest.mark.parametrize("bad,match", [
    ({"nproc": 0}, r"nproc must be a whole number in \[1, 64\], got 0"),
    ({"nproc": -1}, r"nproc must be a whole number in \[1, 64\]"),
    ({"nproc": 10**12}, r"nproc must be a whole number in \[1, 64\]"),
    ({"nproc": "x"}, r"nproc must be a whole number"),
    ({"nproc": 1.5}, r"nproc must be a whole number"),
    ({"nproc": math.nan}, r"nproc must be a whole number"),
    ({"nproc": True}, r"nproc must be a whole number"),
    ({"nproc": None}, r"nproc must be a whole number"),
    ({"nnodes": 0}, r"nnodes must be a whole number in \[1, 1024\]"),
    ({"nnodes": "inf"}, r"nnodes must be a whole number"),
    ({"nproc": 2, "top_layers": 2}, r"top_layers \(2\) trains in one process"),
    ({"nnodes": 2, "top_layers": 1}, r"top_layers \(1\) trains in one process"),
])
def test_world_settings_refuse_bad_values(bad, match):
    with pytest.raises(UserError, match=match):
        TrainConfig(corpus="x.csv", **bad)


def test_effective_batch_and_steps_count_every_process():
    cfg = TrainConfig(corpus="x.csv", batch_size=8, nproc=2, nnodes=3, epochs=2)
    assert (cfg.world_size, cfg.effective_batch_size) == (6, 48)
    assert total_steps(cfg, 100) == 4  # 100 // 48 = 2 steps an epoch (a partial batch is dropped), 2 epochs
    single = TrainConfig(corpus="x.csv", batch_size=8, epochs=2)
    assert total_steps(single, 100) == 26  # ceil(100 / 8) = 13 an epoch


def test_the_train_page_offers_processes_only_with_several_gpus():
    from core.training.config import nproc_choice

    assert nproc_choice(0) is None and nproc_choice(1) is None
    choice = nproc_choice(4)
    assert (choice.name, choice.default, choice.low, choice.high) == ("nproc", 1, 1, 4)
    with pytest.raises(UserError, match=r"nproc must be a whole number in \[1, 4\]"):
        choice.parse(5)
    assert nproc_choice(1000).high == 64


def test_a_run_set_for_several_processes_refuses_one(tiny_model_dir, tmp_path):
    """A run started in one process (a sweep's child, a direct call) while its config says 2 is refused at once."""
    from core.training.trainer import SilentReporter, run_training

    with pytest.raises(UserError, match="set to train over 2 processes .* started in 1"):
        run_training(TrainConfig.from_dict(_config(tiny_model_dir, nproc=2)), SilentReporter(), tmp_path)


def test_a_run_over_several_nodes_needs_its_rendezvous(tiny_model_dir, contrastlab_home):
    store = RunStore(contrastlab_home)
    run_id = store.create("train", _config(tiny_model_dir, nnodes=2))
    with pytest.raises(UserError, match="trains over 2 machines.*--master-addr"):
        launch.start(store, run_id)
    assert store.get(run_id).pid is None


@pytest.mark.parametrize("flags,message", [
    (["--nproc", "0"], "nproc must be a whole number in [1, 64], got '0'"),
    (["--nproc", "-1"], "nproc must be a whole number in [1, 64], got '-1'"),
    (["--nproc", "100000000000000000000"], "nproc must be a whole number in [1, 64]"),
    (["--nproc", "x"], "nproc must be a whole number in [1, 64], got 'x'"),
    (["--nproc", "nan"], "nproc must be a whole number"),
    (["--nproc", ""], "nproc must be a whole number"),
    (["--nnodes", "0"], "nnodes must be a whole number in [1, 1024], got '0'"),
    (["--nnodes", "2"], "A run over 2 machines needs --master-addr"),
    (["--nnodes", "2", "--node-rank", "2", "--master-addr", "h"], "node_rank must be below nnodes (2)"),
    (["--nnodes", "2", "--node-rank", "-1", "--master-addr", "h"], "node_rank must be a whole number"),
    (["--nnodes", "2", "--node-rank", "x", "--master-addr", "h"], "node_rank must be a whole number"),
    (["--node-rank", "1"], "--node-rank apply to a run over several machines"),
    (["--master-addr", "h", "--master-port", "1"], "--master-addr, --master-port apply to a run over several"),
    (["--nnodes", "2", "--master-addr", "h", "--master-port", "0"], "master_port must be a whole number in [1, 65535]"),
    (["--nnodes", "2", "--master-addr", "h", "--master-port", "70000"], "master_port must be a whole number"),
    (["--nnodes", "2", "--master-addr", "a b"], "master_addr must be a host name or IP address, got 'a b'"),
    (["--nnodes", "2", "--master-addr", "h" * 100_000], "master_addr must be a host name or IP address, got 'hhh"),
    (["--nnodes", "2", "--master-addr", "a\nb"], "master_addr must be text without line breaks"),
    (["--nnodes", "2", "--master-addr", ""], "needs --master-addr"),
    (["--nproc", "2", "--top-layers", "2"], "top_layers (2) trains in one process"),
])
def test_cli_refuses_bad_launch_flags_with_one_line_and_no_run(flags, message, tiny_model_dir, capsys):
    assert main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), *flags]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err, err
    assert RunStore().list() == []


def test_cli_sweep_refuses_a_config_over_several_processes(tiny_model_dir, tmp_path, capsys):
    config = tmp_path / "ddp.json"
    config.write_text(json.dumps(_config(tiny_model_dir, nproc=2)))
    assert main(["sweep", "--config", str(config), "--margins", "0.1,1"]) == 2
    assert "A sweep trains each configuration in one process" in capsys.readouterr().err
    assert RunStore().list() == []


class _Failure:
    """A torchrun ProcessFailure as describe_failure reads it."""

    def __init__(self, pid: int, exitcode: int, message: object = "", timestamp: int = 100) -> None:
        self.pid, self.exitcode, self.message, self.timestamp = pid, exitcode, message, timestamp

    def signal_name(self) -> str:
        return signal.Signals(-self.exitcode).name


def test_the_failure_line_names_the_rank_that_ended_first_not_those_stopped_after():
    stopped = {0: _Failure(10, 1, {"message": "PeerLost: torchrun's agent stopped this process"}, timestamp=99),
               2: _Failure(12, -signal.SIGTERM, timestamp=99)}
    line, user_error = ddp.describe_failure({**stopped, 1: _Failure(11, -signal.SIGKILL)}, 3)
    assert line == ("Rank 1 of 3 (pid 11) was killed by signal 9 (SIGKILL); torchrun stopped the other 2 (details in "
                    "worker.log).") and not user_error
    line, user_error = ddp.describe_failure({**stopped, 1: _Failure(11, 1, {"message": "ValueError: boom"})}, 3)
    assert line.startswith("Rank 1 of 3 (pid 11) failed: ValueError: boom;") and not user_error
    line, user_error = ddp.describe_failure({1: _Failure(11, 1, {"message": "UserError: nproc 4 asks for"})}, 2)
    assert line.startswith("Rank 1 of 2 (pid 11): nproc 4 asks for") and user_error
    line, _ = ddp.describe_failure({0: _Failure(10, 3)}, 2)
    assert line.startswith("Rank 0 of 2 (pid 10) exited with status 3")
    line, _ = ddp.describe_failure(stopped, 4, nnodes=2)  # node 0's view when a rank of another node died
    assert line.startswith("Rank 0 of 4 (pid 10) lost the run's processes on another machine"), line


def test_a_sigterm_while_a_rank_writes_its_error_file_leaves_the_file_whole(tmp_path, monkeypatch):
    """Seen in CI: a rank died, and the agent's SIGTERM reached rank 0 while it wrote its own error (the peer's closed
    connection); the handler's PeerLost cut the file short, and the launcher failed the run with "torchrun could not
    start the processes: JSONDecodeError" instead of naming the killed rank. Here the SIGTERM comes mid-write."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure, error_handler, record

    target = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(target))
    head = '{"message": '

    def interrupted(data, fp) -> None:
        fp.write(head)
        fp.flush()
        os.kill(os.getpid(), signal.SIGTERM)
        fp.write(json.dumps(data)[len(head):])

    def fails() -> None:
        raise RuntimeError("Connection closed by peer")

    monkeypatch.setattr(error_handler.json, "dump", interrupted)
    previous = signal.signal(signal.SIGTERM, ddp._stopped)
    done = threading.Event()
    other = threading.Thread(target=done.wait)  # a rank has other threads, which take a signal this one holds
    other.start()
    try:
        with pytest.raises(ddp.PeerLost):  # the SIGTERM is still handled, once the file is whole
            record(fails, ddp._whole_error_file())()
    finally:
        signal.signal(signal.SIGTERM, previous)
        done.set()
        other.join()
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(target))  # as torchrun's agent reads it
    assert ddp._error_text(failure) == "RuntimeError: Connection closed by peer"
    assert list(tmp_path.iterdir()) == [target]
