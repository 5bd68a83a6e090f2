"""Starting a detached worker process (`python -m core.jobs.worker ROOT ...`, or a distributed run's launcher
`python -m core.jobs.ddp ...`).

Its own module because both a run's launcher and the standby pool start workers, and the worker body
itself must import neither of them back.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from core.errors import UserError
from core.runs.store import RunStore
from core.storage import REPO_ROOT

LOG_NAME = "worker.log"


def worker_env() -> dict[str, str]:
    """This process's environment with the repository importable, for the processes that run ContrastLab code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # worker.log shows output as it happens
    return env


def spawn(store: RunStore, args: list[str], log_path: Path, module: str = "core.jobs.worker") -> int:
    """`python -m MODULE ROOT *args` as a detached process (own session: closing the app's terminal or tab does
    not stop it), output appended to log_path. Returns its pid."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(store.root), *args],
            cwd=REPO_ROOT, env=worker_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # Wait for it in the background so a finished worker does not linger as a zombie of the app, and record how
    # it ended: a worker killed by a signal (out of memory, kill -9) cannot say so itself.
    threading.Thread(target=_record_exit, args=(store, proc), name=f"worker-{proc.pid}", daemon=True).start()
    return proc.pid


def _record_exit(store: RunStore, proc: subprocess.Popen) -> None:
    status = proc.wait()
    try:
        store.record_exit(proc.pid, status)
    except (sqlite3.Error, OSError, UserError):  # only the detail is lost: the reaper still fails the run
        pass
