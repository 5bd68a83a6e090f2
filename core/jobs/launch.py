"""Starting a queued run (hand it to a waiting standby worker, else spawn a fresh one; a run over several processes
gets its DDP launcher, core.jobs.ddp), and following it."""

from __future__ import annotations

import os
import threading
import time

from core.errors import UserError
from core.jobs import ddp, standby, worker
from core.jobs.process import LOG_NAME, spawn
from core.runs.store import Run, RunStore, pid_alive
from core.storage import remove_stale_temps
from core.training.config import TrainConfig

EXIT_RECORD_S = 0.5  # time for a dead worker's parent to record how it ended (core.jobs.process)


def start(store: RunStore, run_id: str, meet: ddp.Rendezvous | None = None) -> int:
    """Execute a queued run in a detached process: a waiting standby (core.jobs.standby) when there is one,
    else a new worker; a train run over several processes (nproc x nnodes > 1) starts its DDP launcher instead,
    which meets the other nodes at `meet` (core.jobs.ddp.rendezvous). Its output goes to <run_dir>/worker.log.
    Returns the pid of the run's process (the worker, or the launcher)."""
    cfg = _queued(store, run_id)
    if cfg is not None and cfg.world_size > 1:
        pid = ddp.start(store, run_id, cfg.nproc, cfg.nnodes, meet)
    else:
        pid = standby.hand_over(store, run_id) or spawn(store, [run_id], store.run_dir(run_id) / LOG_NAME)
    _claim(store, run_id, pid)
    return pid


def start_here(store: RunStore, run_id: str) -> threading.Thread:
    """Execute a queued run in a thread of this process (the CLI's --foreground): no worker process to start, whose
    imports take 8-10 s of CPU, for a debugger or a profiler, or a batch job that should end with its run. The run
    ends with this process. Returns the thread, started."""
    cfg = _queued(store, run_id)
    if cfg is not None and cfg.world_size > 1:
        raise UserError(f"Run {run_id} trains over {cfg.world_size} processes, which their launcher starts; "
                        "it cannot run in the foreground.")
    _claim(store, run_id, os.getpid())
    remove_stale_temps()  # as a worker does when it starts
    thread = threading.Thread(target=_execute_here, args=(store, run_id), name=f"run-{run_id}", daemon=True)
    thread.start()
    return thread


def _execute_here(store: RunStore, run_id: str) -> None:
    try:
        worker.execute(store, run_id)
    except BaseException as exc:  # execute records every Exception; anything else would leave the run active
        if store.get(run_id).active:
            store.mark_failed(run_id, f"The run stopped without a verdict: {type(exc).__name__}: {exc}")
        raise


def _queued(store: RunStore, run_id: str) -> TrainConfig | None:
    """Refuse a run that was started already; its run folder made; its train config (None: not a valid train)."""
    run = store.get(run_id)
    if run.status != "queued" or run.pid is not None:
        raise UserError(f"Run {run_id} was already started (it is {run.status}); create a new run to train again.")
    store.run_dir(run_id).mkdir(parents=True, exist_ok=True)
    return _train_config(run)


def _claim(store: RunStore, run_id: str, pid: int) -> None:
    if not store.claim(run_id, pid):  # another tab started it at the same moment; ours will exit
        raise UserError(f"Run {run_id} was started by another session at the same moment; it runs there.")


def _train_config(run: Run) -> TrainConfig | None:
    """A train run's config; None for other kinds, and for a config that does not validate, which a worker then
    fails with the reason as it always has."""
    if run.kind != "train":
        return None
    try:
        return TrainConfig.from_dict(run.config)
    except UserError:
        return None


def poll(store: RunStore, run_id: str) -> Run:
    """The run as it stands, for whoever follows it (the CLI, the Train page's live panel). A worker killed by a
    signal or out of memory never reports, so an active run whose worker is gone is failed here (by the reaper,
    saying how it died where its parent recorded that) instead of being waited for forever."""
    run = store.get(run_id)
    if not run.active or run.pid is None or pid_alive(run.pid):
        return run
    time.sleep(EXIT_RECORD_S)
    store.reap_orphans()
    return store.get(run_id)
