"""A run trained over several processes (PyTorch DDP): its launcher, which runs torchrun, and the body of each
process (rank).

Why torchrun rather than `accelerate launch`: it ships with torch, so there is nothing more to install or configure;
its elastic agent stops the remaining ranks within moments when one dies, so no rank is left waiting in a collective
for a peer that is gone; and sentence-transformers' trainer (a Hugging Face Trainer) picks the process group up from
the environment it sets (RANK, WORLD_SIZE, MASTER_ADDR, ...). It runs inside the launcher's process
(torch.distributed.run), so the launcher gets every failed rank's exit and error as data and can name the cause.

- `python -m core.jobs.ddp ROOT RUN_ID --nproc N --nnodes M [--node-rank 0 --master-addr H --master-port P]`: the
  launcher, detached (core.jobs.launch.start spawns it instead of a worker; its pid is the run's). torchrun
  `--standalone` on one node, a static rendezvous at H:P over several. When a rank dies it records the run as
  failed, naming that rank and how it ended; stopped itself (`kill PID`), it cancels the run, as a worker does.
- `python -m core.jobs.ddp --rank --launcher PID [ROOT RUN_ID]`: each rank, as torchrun starts it. Rank 0 reads the
  run's config from the store, broadcasts it and executes the run (core.jobs.worker.execute) under the launcher's
  pid, so status, progress, cancel and artefacts work as for any run; the others train with what rank 0 sends
  (core.training.trainer.run_training) and never open the store. Every rank leaves when its launcher is gone.
- A follower node (`python -m core train --node-rank R`, R > 0) runs the launcher in the foreground, with no run:
  its ranks get everything from rank 0.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError, shorten
from core.jobs.process import LOG_NAME, spawn, worker_env
from core.runs.store import RunStore
from core.training.config import GENERAL_PARAMS, MAX_NNODES
from core.training.params import Param

SHUTDOWN_S = 5  # torchrun's wait between SIGTERM and SIGKILL when it stops the ranks (its default is 30 s)
PARENT_POLL_S = 0.5  # how often a rank checks that its launcher is still there
_HOST = re.compile(r"[A-Za-z0-9._:\[\]-]{1,253}")


def _host(value: str) -> str:
    if not _HOST.fullmatch(value.strip()):
        raise UserError(f"master_addr must be a host name or IP address, got {shorten(value)}")
    return value.strip()


NODE_RANK = Param("node_rank", int, 0, "Node rank", "This machine's place among the nodes: 0 for the one that "
                  "starts the run, 1 ... nnodes - 1 for the others.", low=0, high=MAX_NNODES - 1)
MASTER_ADDR = Param("master_addr", str, None, "Master address", "Node 0's host name or IP address, reachable from "
                    "every node.", optional=True, check=_host)
MASTER_PORT = Param("master_port", int, 29500, "Master port", "A free TCP port on node 0 where the nodes meet.",
                    low=1, high=65535)


@dataclass(frozen=True)
class Rendezvous:
    """Where the nodes of a run over several machines meet (torchrun's static rendezvous): node 0's address and a
    free port there, and this node's rank."""

    master_addr: str
    master_port: int
    node_rank: int

    def flags(self) -> list[str]:
        return ["--node-rank", str(self.node_rank), "--master-addr", self.master_addr,
                "--master-port", str(self.master_port)]


def rendezvous(nnodes: object, node_rank: object = None, master_addr: object = None,
               master_port: object = None) -> Rendezvous | None:
    """The checked rendezvous of a run over `nnodes` machines; None on one machine, where torchrun finds a free
    port itself. One line for any bad value."""
    nnodes = GENERAL_PARAMS["nnodes"].parse(nnodes)
    if nnodes == 1:
        given = [p.flag for p, v in ((NODE_RANK, node_rank), (MASTER_ADDR, master_addr), (MASTER_PORT, master_port))
                 if v is not None]
        if given:
            raise UserError(f"{', '.join(given)} apply to a run over several machines; set --nnodes too, or leave "
                            f"{'it' if len(given) == 1 else 'them'} out.")
        return None
    rank = NODE_RANK.parse(0 if node_rank is None else node_rank)
    if rank >= nnodes:
        raise UserError(f"node_rank must be below nnodes ({nnodes}): 0 for the machine that starts the run, 1 to "
                        f"{nnodes - 1} for the others; got {rank}")
    addr = MASTER_ADDR.parse(master_addr)
    if addr is None:
        raise UserError(f"A run over {nnodes} machines needs --master-addr: node 0's host name or IP address, "
                        "given on every node.")
    port = MASTER_PORT.parse(MASTER_PORT.default if master_port is None else master_port)
    return Rendezvous(addr, port, rank)


def start(store: RunStore, run_id: str, nproc: int, nnodes: int, meet: Rendezvous | None) -> int:
    """Spawn the run's launcher, detached, its output (and its ranks') in the run's worker.log; its pid."""
    if nnodes > 1 and meet is None:
        raise UserError(f"Run {run_id} trains over {nnodes} machines: start it with `python -m core train` and "
                        "--master-addr (and --node-rank 1 ... on the other machines).")
    args = [run_id, "--nproc", str(nproc), "--nnodes", str(nnodes), *(meet.flags() if meet else [])]
    return spawn(store, args, store.run_dir(run_id) / LOG_NAME, module="core.jobs.ddp")


# --- the launcher ----------------------------------------------------------------------------------------------------


def launch(nproc: int, nnodes: int, meet: Rendezvous | None, store: RunStore | None = None,
           run_id: str | None = None) -> tuple[str, str | None]:
    """Run torchrun with this node's `nproc` ranks until they end; (how it ended: "done", "failed" or "stopped",
    the cause when not done). With a run (node 0), record what rank 0 could not: a failure it did not see (another
    rank died, or it was killed itself) or the launcher being stopped (a cancel)."""
    # torch only here: the app and the CLI import this module to start a launcher, not to be one
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    os.environ.update(worker_env())  # the ranks import core from the repository wherever the launcher started
    # torchrun would give each rank 1 thread; a CPU run's ranks share the cores instead
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    node = meet.node_rank if meet else 0
    print(f"[ddp] launcher pid {os.getpid()}: {nproc} process(es) on node {node} of {nnodes}"
          + (f" for run {run_id}" if run_id else ""), flush=True)
    if store is not None:
        store.set_progress(run_id, phase=f"starting {nproc} process(es)" + (f", waiting for {nnodes - 1} other "
                                                                              "node(s)" if nnodes > 1 else ""))
        _cancel_while_starting(store, run_id)
    rank_args = ["--rank", "--launcher", str(os.getpid()), *([str(store.root), run_id] if store else [])]
    argv = ["--nproc-per-node", str(nproc), "--nnodes", str(nnodes), "--shutdown-timeout", str(SHUTDOWN_S),
            *(meet.flags() if meet else ["--standalone"]), "-m", "core.jobs.ddp", *rank_args]
    try:
        run(parse_args(argv))
    except ChildFailedError as exc:
        cause, user_error = describe_failure(exc.failures, nproc * nnodes, nnodes)
        return "failed", _record(store, run_id, cause, user_error)
    except (SignalException, KeyboardInterrupt) as exc:
        name = exc.sigval.name if isinstance(exc, SignalException) else "SIGINT"
        print(f"[ddp] launcher stopped by {name}; torchrun stopped the processes", flush=True)
        if store is not None:
            store.mark_cancelled(run_id)  # as `kill PID` cancels a worker's run
        return "stopped", f"stopped by {name}"
    except Exception as exc:  # the processes could not start or meet (a port in use, a node unreachable)
        return "failed", _record(store, run_id, f"torchrun could not start the processes: {type(exc).__name__}: "
                                                f"{' '.join(str(exc).split())}", False)
    if store is not None and store.get(run_id).active:  # rank 0 returns only after recording; this is a guard
        return "failed", _record(store, run_id, "the processes ended without rank 0 recording a result", False)
    return "done", None


def _cancel_while_starting(store: RunStore, run_id: str) -> None:
    """Until rank 0 starts the run (marks it running, and from then on polls for a cancel itself), a cancel ends the
    launcher here: torchrun may be waiting for another node that never comes, inside torch.distributed, where no
    signal handler runs. Ranks already started leave with it (_leave_with). Checked from a daemon thread."""

    def watch() -> None:
        while (run := store.get(run_id)).status == "queued":
            if run.cancel_requested:
                store.mark_cancelled(run_id)
                print(f"[ddp] run {run_id} cancelled while its processes were starting", flush=True)
                os._exit(1)
            time.sleep(PARENT_POLL_S)

    threading.Thread(target=watch, name="ddp-cancel", daemon=True).start()


def _record(store: RunStore | None, run_id: str | None, cause: str, user_error: bool) -> str:
    """Fail the run with `cause`, and say it in the log, unless rank 0 recorded how the run ended. Returns the
    cause."""
    if store is not None and not store.get(run_id).active:
        return cause
    print(f"[ddp] {cause}", flush=True)
    if store is not None:
        if user_error:  # the CLI exits 2 for input errors (core.jobs.worker.execute sets it the same way)
            store.set_progress(run_id, user_error=True)
        store.mark_failed(run_id, cause)
    return cause


class PeerLost(Exception):
    """This rank stopped because another one went away (its connection closed, or torchrun's agent stopped this one
    after another died): a consequence, never the cause, so the launcher names another rank."""


def _raised(failure) -> bool:
    """Whether the rank ended on an exception that its error file recorded (record() writes a structured message)."""
    return isinstance(failure.message, dict)


def _error_text(failure) -> str:
    """A failed rank's error as one line: the exception its error file recorded, else how the process ended."""
    if _raised(failure):
        return " ".join(str(failure.message.get("message", "")).split())
    if failure.exitcode < 0:
        return f"was killed by signal {-failure.exitcode} ({failure.signal_name()})"
    return f"exited with status {failure.exitcode}"


def describe_failure(failures: dict, world: int, nnodes: int = 1) -> tuple[str, bool]:
    """The run's error line from this node's failed ranks (torchrun's: global rank -> ProcessFailure), and whether
    its cause is the user's input (a UserError). The cause is the first rank to fail that was not merely stopped
    because another had (SIGTERM from torchrun's agent, or PeerLost); when every one here was, over several machines,
    the cause is on another."""
    def secondary(failure) -> bool:
        return failure.exitcode == -signal.SIGTERM or _error_text(failure).startswith(PeerLost.__name__)

    ranked = sorted(failures.items(), key=lambda item: (secondary(item[1]), item[1].timestamp, item[0]))
    rank, failure = ranked[0]
    text = _error_text(failure)
    user_error = text.startswith(f"{UserError.__name__}: ")
    if user_error:
        what = ": " + text.removeprefix(f"{UserError.__name__}: ")
    elif nnodes > 1 and secondary(failure):
        what = f" lost the run's processes on another machine (their node's output says why): {text}"
    else:
        what = f" failed: {text}" if _raised(failure) else f" {text}"
    others = f"; torchrun stopped the other {world - 1}" if world > 1 else ""
    return f"Rank {rank} of {world} (pid {failure.pid}){what}{others} (details in worker.log).", user_error


# --- each rank -------------------------------------------------------------------------------------------------------


def _leave_with(launcher: int) -> None:
    """End this rank at once when its launcher is gone (killed with SIGKILL, so it could not stop the ranks itself):
    an orphaned rank would go on training, or wait for peers forever. Checked from a daemon thread."""

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(PARENT_POLL_S)
        print(f"[ddp] pid {os.getpid()}: launcher {launcher} is gone; leaving", flush=True)
        os._exit(1)

    threading.Thread(target=watch, name="ddp-launcher", daemon=True).start()


def _whole_error_file():
    """torchrun's error handler, writing a rank's error file whole: the agent reads it as JSON, and a file cut short
    (the agent's SIGTERM arriving mid-write, where this rank's handler raises PeerLost) failed the launcher with a
    JSONDecodeError instead of naming the rank that died. Written under another name and renamed, with a SIGTERM
    that comes meanwhile only noted, and raised again once the file is in place. (Blocking the signal would hold it
    on this thread only; the rank's other threads would still take it.)"""
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    class WholeErrorFile(ErrorHandler):
        _part: str | None = None

        def _get_error_file_path(self) -> str | None:
            return self._part or super()._get_error_file_path()

        def record_exception(self, e: BaseException) -> None:
            target = super()._get_error_file_path()
            if target is None:
                return super().record_exception(e)
            came: list[int] = []
            previous = signal.signal(signal.SIGTERM, lambda signum, frame: came.append(signum))
            try:
                self._part = f"{target}.part"
                super().record_exception(e)
                os.replace(self._part, target)
            finally:
                self._part = None
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            if came:
                signal.raise_signal(signal.SIGTERM)

    return WholeErrorFile()


def _lost_peer(exc: BaseException) -> bool:
    """Whether `exc` says another rank went away rather than what this one did. Gloo reports a closed connection as
    a plain RuntimeError, so its text is the only sign."""
    import torch.distributed as dist

    if isinstance(exc, (PeerLost, dist.DistError)):
        return True
    return isinstance(exc, RuntimeError) and any(s in str(exc) for s in ("closed by peer", "reset by peer"))


def _stopped(signum, frame) -> None:
    raise PeerLost("torchrun's agent stopped this process (another process of the run ended, or the launcher was "
                   "stopped)")


def _rank_body(root: str | None, run_id: str | None, launcher: int) -> int:
    """One rank: join the process group, then run (rank 0) or follow the run. Rank 0 exits 0 only when the run is
    done: otherwise torchrun stops the others at once, wherever they wait for it."""
    _leave_with(launcher)
    from core.training import distributed  # torch and the trainer: a launcher does not need them

    distributed.init()
    print(f"[rank {distributed.rank()}] pid {os.getpid()}, {distributed.world_size()} processes", flush=True)
    try:
        if distributed.is_main():
            return _run_rank0(RunStore(root), run_id, launcher)
        return _follow_rank()
    except Exception as exc:
        if _lost_peer(exc) and not isinstance(exc, PeerLost):
            raise PeerLost(" ".join(str(exc).split())) from exc
        raise


def _run_rank0(store: RunStore, run_id: str, launcher: int) -> int:
    from core.jobs.worker import execute
    from core.training import distributed

    run = store.get(run_id)
    distributed.broadcast(run.config if run.status == "queued" else None)
    if run.status != "queued":
        return 0
    signal.signal(signal.SIGTERM, _stopped)  # a cancel only if one was requested (execute decides), else PeerLost
    execute(store, run_id, pid=launcher, unrecorded=_lost_peer)
    status = store.get(run_id).status
    print(f"[rank 0] run {run_id} ended {status}", flush=True)
    return 0 if status == "done" else 1


def _follow_rank() -> int:
    from core.training import distributed
    from core.training.config import TrainConfig
    from core.training.trainer import SilentReporter, run_training

    config = distributed.broadcast()
    if config is None:  # the run was cancelled before it started
        return 0
    with tempfile.TemporaryDirectory(prefix="contrastlab-rank-") as work:  # trainer output; never the run's folder
        run_training(TrainConfig.from_dict(config), SilentReporter(), Path(work))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.jobs.ddp", description="Launch, or be one process of, a "
                                     "ContrastLab run trained over several processes (torchrun, DDP).")
    parser.add_argument("root", nargs="?", help="run store root (the folder holding runs.sqlite)")
    parser.add_argument("run_id", nargs="?", help="the run (node 0 only)")
    parser.add_argument("--rank", action="store_true", help="be one rank (torchrun starts these)")
    parser.add_argument("--launcher", type=int, help="the launcher's pid (with --rank)")
    parser.add_argument("--nproc", default=1)
    parser.add_argument("--nnodes", default=1)
    parser.add_argument(NODE_RANK.flag)
    parser.add_argument(MASTER_ADDR.flag)
    parser.add_argument(MASTER_PORT.flag)
    args = parser.parse_args(argv)
    if args.rank and args.launcher is None:
        parser.error("--rank needs --launcher PID (torchrun starts the ranks; see core.jobs.ddp.launch)")
    if args.rank:
        from torch.distributed.elastic.multiprocessing.errors import record  # writes the error file torchrun reads

        try:
            return record(_rank_body, _whole_error_file())(args.root, args.run_id, args.launcher)
        except PeerLost as exc:  # a consequence, recorded for torchrun: one line rather than a traceback
            print(f"[ddp] pid {os.getpid()} stopped: {exc}", flush=True)
            return 1
    if bool(args.root) != bool(args.run_id):
        parser.error("give both ROOT and RUN_ID (node 0), or neither (a follower node)")
    try:
        nproc = GENERAL_PARAMS["nproc"].parse(args.nproc)
        meet = rendezvous(args.nnodes, args.node_rank, args.master_addr, args.master_port)
    except UserError as exc:
        parser.error(str(exc))
    store = RunStore(args.root) if args.root else None
    status, _cause = launch(nproc, GENERAL_PARAMS["nnodes"].parse(args.nnodes), meet, store, args.run_id)
    if store is not None:
        status = store.get(args.run_id).status
        print(f"[ddp] run {args.run_id} ended {status}", flush=True)
    return 0 if status == "done" else 1


if __name__ == "__main__":
    # Delegate to the imported module, not this __main__ copy, so a rank's exceptions are the classes others test
    # for (PeerLost), as core.jobs.worker does.
    from core.jobs.ddp import main as _main

    sys.exit(_main())
