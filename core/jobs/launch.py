"""Starting a queued run (hand it to a waiting standby worker, else spawn a fresh one), and following it."""

from __future__ import annotations

import time

from core.errors import UserError
from core.jobs import standby
from core.jobs.process import LOG_NAME, spawn
from core.runs.store import Run, RunStore, pid_alive

EXIT_RECORD_S = 0.5  # time for a dead worker's parent to record how it ended (core.jobs.process)


def start(store: RunStore, run_id: str) -> int:
    """Execute a queued run in a detached process: a waiting standby (core.jobs.standby) when there is one,
    else a new worker. Its output goes to <run_dir>/worker.log. Returns the worker's pid."""
    run = store.get(run_id)
    if run.status != "queued" or run.pid is not None:
        raise UserError(f"Run {run_id} was already started (it is {run.status}); create a new run to train again.")
    run_dir = store.run_dir(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    pid = standby.hand_over(store, run_id) or spawn(store, [run_id], run_dir / LOG_NAME)
    if not store.claim(run_id, pid):  # another tab started it at the same moment; ours will exit
        raise UserError(f"Run {run_id} was started by another session at the same moment; it runs there.")
    return pid


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
