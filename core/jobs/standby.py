"""Pre-warmed workers: a detached process that has already imported torch and sentence-transformers and
waits for a run, so a run started from the app starts working at once.

Why: those imports take about 9 s on 2 CPU cores, a third of a quick margin point's wall time. The app
keeps one standby per run store (`ensure`, called by the pages that start runs); `launch.start` hands a
queued run to a waiting standby (`hand_over`) and only spawns a fresh worker when none is waiting. A
standby nobody uses exits after `idle_s()`.

A standby's state is one marker file, standby/<pid>.<state>, moved between states by rename, which is
atomic: of two sessions handing over at once, or a hand-over racing the standby's own time-out, exactly
one rename succeeds. States: warming (importing) -> ready -> taken (a run is being handed over) -> busy (running
it) -> ready again once that run is done (`serve_again`), or gone.

Why a standby goes back on standby after its run, instead of leaving for a new one to import: the next run (a
second quick point, a second CLI call) finds a worker ready at once, its imports done and its ONNX Runtime sessions
kept, where a new standby started as the last run ended would still be importing (6-7 s of a quick point's ~20 s).
While busy it counts as this store's standby for `ensure`, so no second one imports beside the run, but it takes no
hand-over: a run started meanwhile gets a worker of its own. One whose run failed or was stopped exits.

A standby is detached (its own session, so a run it takes outlives the tab and the server), which also means nothing
ends it with the server that started it: it watches that process and leaves within a second of it going, or, when
it has been handed a run by then, once that run ends.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

from core import collector
from core.errors import env_seconds
from core.jobs.process import spawn
from core.runs.store import RunStore, pid_alive

# What a training or sweep run imports before its first step: the trainer module pulls in torch,
# sentence-transformers and the Hugging Face trainer; mining adds FAISS.
WARM_MODULES = ("core.training.trainer", "core.jobs.sweep", "core.data.mining")
ENV = "CONTRASTLAB_STANDBY_S"
DEFAULT_IDLE_S = 900.0
CLI_IDLE_S = 300.0  # a standby a CLI call leaves for the next one waits this long (it has no server to leave with)
POLL_S = 0.05
PARENT_POLL_S = 0.5  # how often a standby checks that the process that started it is still there
RUN_FILE = "{pid}.run"
STATES = ("warming", "ready", "taken", "busy", "gone")


def idle_s() -> float:
    """How long a standby waits for a run; CONTRASTLAB_STANDBY_S overrides it, 0 turns standbys off; a UserError for
    a value that is not a finite number of seconds, 0 or more."""
    return env_seconds(ENV, DEFAULT_IDLE_S, "the seconds a warm worker waits unused (0 turns them off)")


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
    command = _command(pid)
    if command is None or command == [b""]:
        # No procfs (macOS): trust the pid. Empty: an exec under way. The kernel lets spawn() return once the exec is
        # committed, before the new program's arguments are in place, and a standby counted as gone in that moment
        # had its marker removed and a second one started (seen once on CI, at load 6).
        return True
    if pid != os.getpid() and command == _command(os.getpid()):
        return True  # forked by this process and not yet exec'd: a standby spawn() started a moment ago
    return b"core.jobs.worker" in command and b"--standby" in command


def _command(pid: int) -> list[bytes] | None:
    """The process's arguments as procfs shows them; None without procfs."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def ensure(store: RunStore, detached_s: float | None = None) -> int | None:
    """The pid of a live standby for this store (warming or ready), starting one if there is none.

    None when standbys are off (CONTRASTLAB_STANDBY_S=0, as in the tests), or when none waits while a run
    is active: a new one would take CPU from that run for its imports; the page asks again afterwards.
    Cheap: a directory listing and one query. Two sessions calling at once may start two; one times out.
    `detached_s`: a standby for the next CLI call, which does not leave with this process and waits at most that
    long (a server's standby leaves with the server).
    """
    if idle_s() <= 0:
        return None
    existing = _markers(store, "warming", "ready", "busy")  # a busy one is back on standby after its run
    if existing:
        return next(iter(existing))
    if store.any_active():
        return None
    wait = [] if detached_s is None else ["--idle-s", str(min(detached_s, idle_s()))]
    pid = spawn(store, ["--standby", *wait], folder(store) / "standby.log")
    tmp = folder(store) / f".{pid}.warming.tmp"  # whole or not at all: the standby reads it as it may appear
    # the standby's parent, which it leaves with; none recorded for a detached one
    tmp.write_text("" if detached_s is not None else str(os.getpid()), encoding="utf-8")
    tmp.rename(folder(store) / f"{pid}.warming")
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


def serve(store: RunStore, wait_s: float | None = None) -> str | None:
    """The body of a standby process: import, say ready, wait for a run id (idle_s(), or `wait_s` when given);
    None when none came in time (or the standby was stopped). The run it returns finds this standby busy."""
    marker = _marker(store)
    _leave_with_parent(marker)
    for module in WARM_MODULES:
        importlib.import_module(module)
    try:
        marker["warming"].rename(marker["ready"])
    except FileNotFoundError:  # handed a run while importing (taken), else stopped: nothing to wait for
        if not marker["taken"].exists():
            _clear(marker)
            return None
    return _wait_for_run(marker, wait_s)


def serve_again(store: RunStore, wait_s: float | None = None) -> str | None:
    """Back on standby after a run that ended done (module docstring): wait for the next run id as `serve` does."""
    marker = _marker(store)
    _release_memory()
    try:
        marker["busy"].rename(marker["ready"])
    except FileNotFoundError:  # its marker was removed by hand: leave as a stopped standby does
        _clear(marker)
        return None
    return _wait_for_run(marker, wait_s)


def leave(store: RunStore) -> None:
    """Remove this process's markers: a standby whose run did not end done exits instead of waiting again (a fresh
    process is the safer start after a crash or a stop)."""
    _clear(_marker(store))


def _marker(store: RunStore) -> dict[str, Path]:
    """This process's marker in each state, and the file a hand-over writes the run id to."""
    pid, where = os.getpid(), folder(store)
    return {state: where / f"{pid}.{state}" for state in (*STATES, "run")}


def _wait_for_run(marker: dict[str, Path], wait_s: float | None) -> str | None:
    """Wait, ready (or taken), for a run id; on one, busy with it; else gone, its markers removed."""
    try:
        deadline = time.monotonic() + (idle_s() if wait_s is None else wait_s)
        while not marker["run"].exists():
            if time.monotonic() > deadline:
                if _retire(marker):
                    _clear(marker)
                    return None
                deadline = time.monotonic() + 10  # being handed a run right now: its id follows within moments
            time.sleep(POLL_S)
        run_id = marker["run"].read_text(encoding="utf-8")
        marker["taken"].rename(marker["busy"])
        marker["run"].unlink()
        return run_id
    except BaseException:
        _clear(marker)
        raise


def _clear(marker: dict[str, Path]) -> None:
    for path in marker.values():
        path.unlink(missing_ok=True)


def _release_memory() -> None:
    """Hand the finished run's memory back before waiting: its model, optimiser and batches are garbage now. After
    a quick point on 20,000 texts a worker held 1.08 GB, 0.95 GB after the collection and 0.63 GB after the trim,
    against 0.53 GB with the imports alone, and the same after a second."""
    collector.release_memory()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _leave_with_parent(marker: dict[str, Path]) -> None:
    """End this process once the one that started it (the app's server) is gone; one that was handed a run by then
    finishes it first, then leaves instead of going back on standby. An orphaned standby would otherwise hold its
    ~0.5 GB of imports until idle_s() runs out, and no server is left to hand it a run. Checked from a daemon
    thread, so it applies while importing too.

    The parent's pid is what `ensure` wrote into the marker (the marker keeps it through every rename). A process
    whose parent exits is re-parented (to PID 1 or a subreaper), so os.getppid() differs from it from then on, even
    if the parent was gone before this process looked, and no reuse of the pid can make it match again."""

    def watch() -> None:
        parent = None
        while parent is None or os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
            parent = parent or _recorded_parent(marker)
        while not _retire(marker):  # taken or busy: the run is this process's to finish, then it leaves
            time.sleep(PARENT_POLL_S)
        _clear(marker)
        print(f"[worker] pid {os.getpid()} left standby unused: pid {parent}, which started it, is gone", flush=True)
        os._exit(0)

    threading.Thread(target=watch, name="standby-parent", daemon=True).start()


def _recorded_parent(marker: dict[str, Path]) -> int | None:
    """The pid `ensure` recorded in this standby's marker; None while there is none (not written yet; never for a
    detached standby; or never because the parent died first, and then the standby finds no marker after its
    imports and exits)."""
    for state in STATES:
        try:
            return int(marker[state].read_text(encoding="utf-8"))
        except (OSError, ValueError):  # not in this state (or a marker from before pids were recorded)
            continue
    return None


def _retire(marker: dict[str, Path]) -> bool:
    """Mark this standby gone unless a hand-over or a run holds it (it is 'taken' or 'busy'); True when it may exit:
    also when it finds no marker of its own at all, its marker or its whole home removed, since then it has been
    stopped (waiting for one to come back kept a worker of 0.75 GB alive for ever)."""
    for state in ("ready", "warming"):
        try:
            marker[state].rename(marker["gone"])
            return True
        except FileNotFoundError:
            continue
    return not (marker["taken"].exists() or marker["busy"].exists())


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
