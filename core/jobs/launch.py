"""Starting a queued run: hand it to a waiting standby worker, else spawn a fresh one."""

from __future__ import annotations

from core.errors import UserError
from core.jobs import standby
from core.jobs.process import LOG_NAME, spawn
from core.runs.store import RunStore


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
