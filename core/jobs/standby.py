"""Pre-warmed workers: a detached process that has already imported torch and sentence-transformers and
waits for a run, so a run started from the app starts working at once.

Why: those imports take about 9 s on 2 CPU cores, a third of a quick margin point's wall time. The app
keeps one standby per run store (`ensure`, called by the pages that start runs); `launch.start` hands a
queued run to a waiting standby (`hand_over`) and only spawns a fresh worker when none is waiting. A
standby nobody uses exits after `idle_s()`.

A standby's state is one marker file, standby/<pid>.<state>, moved between states by rename, which is
atomic: of two sessions handing over at once, or a hand-over racing the standby's own time-out, exactly
one rename succeeds. States: warming (importing) -> ready -> taken (a run is being handed over) -> gone.
"""

from __future__ import annotations

import importlib
import os
import signal
import time
from pathlib import Path

from core.jobs.process import spawn
from core.runs.store import RunStore, pid_alive

# What a training or sweep run imports before its first step: the trainer module pulls in torch,
# sentence-transformers and the Hugging Face trainer; mining adds FAISS.
WARM_MODULES = ("core.training.trainer", "core.jobs.sweep", "core.data.mining")
DEFAULT_IDLE_S = 900.0
POLL_S = 0.05
RUN_FILE = "{pid}.run"


def idle_s() -> float:
    """How long a standby waits for a run; CONTRASTLAB_STANDBY_S overrides it, 0 turns standbys off."""
    return float(os.environ.get("CONTRASTLAB_STANDBY_S", DEFAULT_IDLE_S))


def folder(store: RunStore) -> Path:
    path = store.root / "standby"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _markers(store: RunStore, *states: str) -> dict[int, Path]:
    """pid -> marker of live standbys in these states; markers of dead processes are removed."""
    found = {}
    for marker in folder(store).glob("*.*"):
        pid, _, state = marker.name.partition(".")
        if state not in states or not pid.isdigit():
            continue
        if _is_standby(int(pid)):
            found[int(pid)] = marker
        else:
            marker.unlink(missing_ok=True)
    return found


def _is_standby(pid: int) -> bool:
    """Alive and, where procfs tells, still a standby worker: a killed standby's pid may be reused."""
    if not pid_alive(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # no procfs (macOS): trust the pid
        return True
    return b"core.jobs.worker" in command and b"--standby" in command


def ensure(store: RunStore) -> int | None:
    """The pid of a live standby for this store (warming or ready), starting one if there is none.

    None when standbys are off (CONTRASTLAB_STANDBY_S=0, as in the tests), or when none waits while a run
    is active: a new one would take CPU from that run for its imports; the page asks again afterwards.
    Cheap: a directory listing and one query. Two sessions calling at once may start two; one times out.
    """
    if idle_s() <= 0:
        return None
    existing = _markers(store, "warming", "ready")
    if existing:
        return next(iter(existing))
    if store.any_active():
        return None
    pid = spawn(store, ["--standby"], folder(store) / "standby.log")
    (folder(store) / f"{pid}.warming").touch()
    return pid


def waiting(store: RunStore) -> bool:
    """Whether a standby has finished its imports and waits for a run (a hand-over now starts work at once)."""
    return bool(_markers(store, "ready"))


def hand_over(store: RunStore, run_id: str) -> int | None:
    """Give a queued run to a standby and record it as the run's process; its pid, or None when there is
    none (the caller then spawns a worker). A ready standby is preferred; one still importing is taken too,
    since it is ready sooner than a new process would be, and starts the run as soon as it is."""
    waiting = {**_markers(store, "ready"), **_markers(store, "warming")}
    for pid, marker in sorted(waiting.items(), key=lambda item: item[1].suffix != ".ready"):
        taken = marker.with_suffix(".taken")
        try:
            marker.rename(taken)
        except FileNotFoundError:  # another session took it, or it timed out just now
            continue
        if not store.claim(run_id, pid):  # the run was started elsewhere meanwhile: keep the standby
            taken.rename(marker)
            return None
        tmp = folder(store) / f".{pid}.run.tmp"
        tmp.write_text(run_id, encoding="utf-8")
        tmp.rename(folder(store) / RUN_FILE.format(pid=pid))
        return pid
    return None


def serve(store: RunStore) -> str | None:
    """The body of a standby process: import, say ready, wait for a run id; None when none came in time (or
    the standby was stopped)."""
    for module in WARM_MODULES:
        importlib.import_module(module)
    pid, where = os.getpid(), folder(store)
    marker = {state: where / f"{pid}.{state}" for state in ("warming", "ready", "taken", "gone", "run")}
    try:
        try:
            marker["warming"].rename(marker["ready"])
        except FileNotFoundError:  # handed a run while importing (taken), else stopped: nothing to wait for
            if not marker["taken"].exists():
                return None
        deadline = time.monotonic() + idle_s()
        while not marker["run"].exists():
            if time.monotonic() > deadline:
                if _retire(marker):
                    return None
                deadline = time.monotonic() + 10  # being handed a run right now: its id follows within moments
            time.sleep(POLL_S)
        return marker["run"].read_text(encoding="utf-8")
    finally:
        for path in marker.values():
            path.unlink(missing_ok=True)


def _retire(marker: dict[str, Path]) -> bool:
    """Mark this standby gone unless a hand-over holds it (it is 'taken'); True when it may exit."""
    for state in ("ready", "warming"):
        try:
            marker[state].rename(marker["gone"])
            return True
        except FileNotFoundError:
            continue
    return False


def stop_all(store: RunStore) -> list[int]:
    """End the waiting standbys of this store (tests, benchmarks, a server shutting down); their pids."""
    stopped = []
    for pid, marker in _markers(store, "warming", "ready").items():
        try:
            marker.rename(marker.with_suffix(".gone"))
        except FileNotFoundError:
            continue
        os.kill(pid, signal.SIGTERM)
        stopped.append(pid)
    return stopped
