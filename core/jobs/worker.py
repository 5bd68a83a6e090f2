"""Background jobs: each run executes in its own detached process.

Why a process and not a thread of the Streamlit server: the run must outlive the browser tab
(and the script rerun) that started it, be stoppable without killing the app, and leave a
trace in the database if it dies. The worker reports everything through the RunStore; the
app only reads it. A job is a plain function `fn(ctx: JobContext) -> dict | None` named in JOBS.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import collector
from core.errors import Cancelled, UserError
from core.jobs import standby
from core.jobs.process import LOG_NAME
from core.runs.store import TMP_NAME, Run, RunStore
from core.storage import remove_stale_temps
from core.training.eta import run_fraction

if TYPE_CHECKING:
    from core.runs.trackers import Trackers

CANCEL_POLL_S = 0.25  # how often a run waiting on its trackers' opening looks for a stop request
JOBS: dict[str, str] = {
    "train": "core.training.trainer:run_job",
    "sweep": "core.jobs.sweep:run_job",
    "reproduce": "core.reproduce.job:run_job",
    "generate": "core.generation.job:run_job",
    "wait": "core.jobs.worker:wait_job",
}


class JobContext:
    """What a job receives: its config and folder, and cheap ways to report and to stop.

    Progress and loss points are buffered and written at most every FLUSH_S seconds (and on a
    phase change), and the cancel flag is polled at most that often, so a job may call
    progress(), log_loss() and should_stop() on every training step.
    """

    FLUSH_S = 0.25

    def __init__(self, store: RunStore, run: Run) -> None:
        self.store = store
        self.run_id = run.id
        self.config = run.config
        self.run_dir = store.run_dir(run.id)
        self._pending_progress: dict[str, Any] = {}
        self._pending_losses: list[tuple[int, float]] = []
        self._phase: Any = None
        self._last_flush = float("-inf")
        self._last_poll = float("-inf")
        self._stop = False
        self._staged: dict[str, Path] = {}
        self.trackers: Trackers | None = None  # execute() opens them for a train run that reports to any
        self._started = store.get(run.id).started or time.time()  # as readers count the run's elapsed time
        self._done_share = 0.0
        self._last_eta: tuple[float, float] | None = None  # the latest estimate and when it was made

    def progress(self, **fields: Any) -> None:
        """Report step, total, loss, examples_per_s, eta_s, phase, ... (merged into the run's progress). With an
        estimate of the time left, the share of the run done so far (done_share) only ever grows: an estimate that
        grows when a phase starts (the evaluation after training) moved the page's bar back, 48% to 29%."""
        new_phase = "phase" in fields and fields["phase"] != self._phase
        self._phase = fields.get("phase", self._phase)
        if "eta_s" in fields:  # when the estimate was made: readers count down from it (core.training.eta)
            fields["eta_at"] = time.time()
            if isinstance(fields["eta_s"], int | float):
                now = fields["eta_at"]
                last = self._last_eta  # what readers show now: the previous estimate, counted down
                shown = last and run_fraction(self._started, max(last[0] - (now - last[1]), 0.0), now)
                share = run_fraction(self._started, max(float(fields["eta_s"]), 0.0), now) or 0.0
                self._done_share = max(self._done_share, share, shown or 0.0)
                self._last_eta = (float(fields["eta_s"]), now)
                fields["done_share"] = round(self._done_share, 4)
        self._pending_progress.update(fields)
        self._maybe_flush(force=new_phase)

    def log_loss(self, step: int, loss: float) -> None:
        self._pending_losses.append((int(step), float(loss)))
        self._maybe_flush()

    def log_eval(self, point: dict) -> None:
        """Record an evaluation point ({"step": ..., **metrics}) immediately: they are rare and precious."""
        self.store.add_history(self.run_id, point)
        if self.trackers is not None:
            self.trackers.evaluation(point)

    def should_stop(self) -> bool:
        """True once a cancel was requested; the job should then raise Cancelled (or return)."""
        now = time.monotonic()
        if not self._stop and now - self._last_poll >= self.FLUSH_S:
            self._last_poll = now
            self._stop = self.store.cancel_requested(self.run_id)
        return self._stop

    def tmp_dir(self) -> Path:
        """Where to write artefacts (models, embeddings) before they are known to be complete."""
        path = self.run_dir / TMP_NAME
        path.mkdir(parents=True, exist_ok=True)
        return path

    def commit_artefact(self, name: str, tmp_path: Path | str) -> Path:
        """Register a file or folder inside tmp_dir() as artefact `name`. It is renamed into the run
        folder only once the job has returned successfully, so a failed or cancelled run never
        leaves an exportable model. Returns the path it will have then."""
        src = Path(tmp_path).resolve()
        tmp = self.tmp_dir().resolve()
        if tmp not in src.parents:
            raise ValueError(f"{src} is not inside the run's tmp_dir() {tmp}")
        if not src.exists():
            raise FileNotFoundError(src)
        self._staged[name] = src
        return self.run_dir / src.relative_to(tmp)

    def flush(self) -> None:
        """Write buffered progress and loss points now."""
        if self._pending_progress:
            self.store.set_progress(self.run_id, **self._pending_progress)
            self._pending_progress = {}
        if self._pending_losses:
            self.store.add_losses(self.run_id, self._pending_losses)
            if self.trackers is not None:
                self.trackers.losses(self._pending_losses)
            self._pending_losses = []
        self._last_flush = time.monotonic()

    def _maybe_flush(self, force: bool = False) -> None:
        if force or time.monotonic() - self._last_flush >= self.FLUSH_S:
            self.flush()

    def _publish(self) -> dict[str, str]:
        """Rename staged artefacts into the run folder (same file system, so each rename is atomic)."""
        tmp = self.tmp_dir().resolve()
        published = {}
        for name, src in self._staged.items():
            dest = self.run_dir / src.relative_to(tmp)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)
            published[name] = str(dest)
        return published

    def report_end(self, status: str, after: dict | None = None) -> None:
        """Send how the run ended to its trackers, before its status is recorded: whoever waits for the status
        then finds the run complete in them too."""
        if self.trackers is not None:
            self.trackers.finish(self.store.get(self.run_id), status, after)
            self.trackers = None

    def _discard_tmp(self) -> None:
        shutil.rmtree(self.run_dir / TMP_NAME, ignore_errors=True)


def _resolve(kind: str) -> Callable[[JobContext], dict | None]:
    """Import the job lazily: the app must not pay for torch just to list runs."""
    target = JOBS.get(kind)
    if target is None:
        raise UserError(f"Unknown run kind '{kind}'; expected one of: {', '.join(sorted(JOBS))}.")
    module, _, name = target.partition(":")
    job = getattr(importlib.import_module(module), name)
    collector.freeze_imports()  # a process that executes runs: its full collections need not walk the imports again
    return job


def _describe(exc: BaseException) -> str:
    """The run's error line: a UserError is already a sentence for the user; anything else gets its type."""
    if isinstance(exc, UserError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _log_traceback(run_dir: Path, exc: BaseException) -> None:
    with open(run_dir / LOG_NAME, "a", encoding="utf-8") as log:
        traceback.print_exception(exc, file=log)


def execute(store: RunStore, run_id: str, pid: int | None = None,
            unrecorded: Callable[[Exception], bool] | None = None,
            job: Callable[[JobContext], dict | None] | None = None) -> None:
    """Run a queued run in this process and record how it ended.

    Used by the worker process, by rank 0 of a distributed run (core.jobs.ddp) and directly by tests and
    `--foreground` CLI runs. Returns without doing anything if the run is no longer queued (cancelled before it
    started, or taken by another process). After a stop request, Cancelled, an early return or any other exception
    all end the run as cancelled. Ctrl-C / SIGTERM count as a cancel and are re-raised so the caller can exit.

    `pid`: the process the run was claimed for (default this one; a distributed run's is its launcher's). An
    exception for which `unrecorded` is true (rank 0 lost another rank) is re-raised without a verdict unless a
    stop was requested: the launcher, which knows which process ended and why, records the failure. `job`: the
    function to run instead of the one JOBS names for the run's kind (a sweep on Ray records a child whose training
    happens in a Ray task).
    """
    run = store.get(run_id)
    if not store.mark_running(run_id, pid or os.getpid()):
        return
    ctx = JobContext(store, run)
    try:
        if store.cancel_requested(run_id):
            raise Cancelled()
        if run.kind == "train" and run.config.get("report_to", "none") != "none":
            ctx.trackers = _open_trackers(store, run, ctx.run_dir / LOG_NAME)
        metrics = (job or _resolve(run.kind))(ctx)
        ctx.flush()
        if store.cancel_requested(run_id):  # the job returned early because it was asked to stop
            raise Cancelled()
        ctx.report_end("done", metrics)
        store.mark_done(run_id, metrics, ctx._publish())
    except (Cancelled, KeyboardInterrupt) as exc:
        ctx.flush()
        ctx.report_end("cancelled")
        store.mark_cancelled(run_id)
        if isinstance(exc, KeyboardInterrupt):
            raise
    except Exception as exc:
        left = unrecorded is not None and unrecorded(exc)
        if not left:  # a lost peer is a consequence: the launcher logs its cause
            _log_traceback(ctx.run_dir, exc)
        ctx.flush()
        if store.cancel_requested(run_id):  # however a job bails out after a stop request, it was cancelled
            ctx.report_end("cancelled")
            store.mark_cancelled(run_id)
        elif left:
            raise
        else:
            ctx.report_end("failed")
            if isinstance(exc, UserError):  # the CLI exits 2 for input errors, 1 for crashes; set before the
                store.set_progress(run_id, user_error=True)  # status, which is what watchers wait for
            store.mark_failed(run_id, _describe(exc))
    finally:
        ctx._discard_tmp()


def _open_trackers(store: RunStore, run: Run, log: Path) -> Trackers:
    """The run's trackers (core.runs.trackers.Trackers), opened in a thread while this one watches for a stop
    request: a tracking server that accepts and never answers held a run at 'starting' for minutes, and a cancel
    never took effect. Cancelled leaves the opening to its daemon thread, which ends with the process."""
    from core.runs.trackers import Trackers  # the trackers' libraries load only for a run that reports

    out: dict[str, Any] = {}

    def open_them() -> None:
        try:
            out["trackers"] = Trackers(run, log)
        except BaseException as exc:  # noqa: BLE001 - raised again in the run's own thread
            out["error"] = exc

    opening = threading.Thread(target=open_them, name="open-trackers", daemon=True)
    opening.start()
    while opening.is_alive():
        opening.join(CANCEL_POLL_S)
        if opening.is_alive() and store.cancel_requested(run.id):
            raise Cancelled()
    if "error" in out:
        raise out["error"]
    return out["trackers"]


def _log_to(path: Path) -> None:
    """Send this process's stdout and stderr to `path` (a standby learns its run, and log, only later)."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)


def main(argv: list[str] | None = None) -> int:
    """`python -m core.jobs.worker ROOT (RUN_ID | --standby)`: the body of a worker process. Exit 0 if the run is
    done (or a standby timed out unused)."""
    parser = argparse.ArgumentParser(prog="python -m core.jobs.worker",
                                     description="Execute one queued ContrastLab run.")
    parser.add_argument("root", help="run store root (the folder holding runs.sqlite)")
    parser.add_argument("run_id", nargs="?", help="the run to execute")
    parser.add_argument("--standby", action="store_true", help="import first, then wait for a run (core.jobs.standby)")
    parser.add_argument("--idle-s", type=float, help="with --standby: wait at most this many seconds for a run")
    args = parser.parse_args(argv)
    if bool(args.run_id) == args.standby:
        parser.error("give either a RUN_ID or --standby")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill PID` ends the run as cancelled
    store = RunStore(args.root)
    remove_stale_temps()  # a worker killed mid-write left its temp file in the cache
    if not args.standby:
        return _run(store, args.run_id)
    print(f"[worker] pid {os.getpid()} on standby", flush=True)
    wait = standby.serve
    while True:  # a standby goes back on standby after each run that ended done (core.jobs.standby)
        try:
            run_id = wait(store, args.idle_s)
        except KeyboardInterrupt:
            return 0
        if run_id is None:
            print(f"[worker] pid {os.getpid()} left standby unused", flush=True)
            return 0
        _log_to(store.run_dir(run_id) / LOG_NAME)
        if _run(store, run_id):
            standby.leave(store)
            return 1
        _log_to(standby.folder(store) / "standby.log")
        print(f"[worker] pid {os.getpid()} back on standby after run {run_id}", flush=True)
        wait = standby.serve_again


def _run(store: RunStore, run_id: str) -> int:
    """Execute a run and say how it ended; 0 if it is done."""
    print(f"[worker] pid {os.getpid()} executing run {run_id}", flush=True)
    try:
        execute(store, run_id)
    except KeyboardInterrupt:
        print("[worker] interrupted", flush=True)
    status = store.get(run_id).status
    print(f"[worker] run {run_id} ended {status}", flush=True)
    return 0 if status == "done" else 1


def wait_job(ctx: JobContext) -> dict:
    """A model-free job for smoke tests of this machinery: `steps` sleeps of `step_s` seconds with
    progress and a loss curve, honours cancel, stages a result artefact, and raises at the end if
    config {"fail": true} (after staging, to show the artefact is then not committed)."""
    steps = int(ctx.config.get("steps", 10))
    step_s = float(ctx.config.get("step_s", 0.05))
    t0 = time.monotonic()
    ctx.progress(phase="waiting", step=0, total=steps)
    for step in range(1, steps + 1):
        if ctx.should_stop():
            raise Cancelled()
        time.sleep(step_s)
        elapsed = time.monotonic() - t0
        ctx.log_loss(step, 1.0 / step)
        ctx.progress(step=step, total=steps, loss=1.0 / step, eta_s=elapsed / step * (steps - step))
    result = ctx.tmp_dir() / "result.json"
    result.write_text(json.dumps({"steps": steps}))
    ctx.commit_artefact("result", result)
    if ctx.config.get("fail"):
        raise RuntimeError("wait job failed on request")
    return {"steps": steps}


if __name__ == "__main__":
    # Delegate to the imported module, not this __main__ copy, so JOBS entries such as
    # "core.jobs.worker:wait_job" raise the same Cancelled class that execute() catches.
    from core.jobs.worker import main as _main

    sys.exit(_main())
