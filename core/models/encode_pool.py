"""A persistent pool of single-threaded worker processes that core.models.encode.encode hands its batches to on CPU.

Why: one process's torch threads wait for each other at every operation, so on a machine whose cores other jobs
share, a core taken away stalls them all; single-thread processes do not wait for each other. On the 2-core test
machine at load 3-5, two of them encoded all-MiniLM-L6-v2 about 2x as fast as one process on two threads (bench
per_row; bench throughput compares them with SentenceTransformer.encode); on an idle machine the two are about even.
`pool_size` decides when the pool is used, and `pool_for` when stopped workers are started: not on an idle machine,
where their start costs more than they gain.

How: the workers are started by the first encode that uses them and stopped once they have sat idle for
CONTRASTLAB_ENCODE_IDLE_S seconds (default 60; 0: right after each encode), since each holds about 0.45 GB that a
laptop wants back while nothing encodes; the next encode starts them again (a few seconds) and ships its model anew.
They are stopped at the process's exit too, and a worker also leaves when its pipe closes or its parent pid changes,
so none outlives a SIGKILLed parent. Each holds the last model shipped to it: the model pickled without its
weights, every weight a view of one shared memory file (a memfd, mapped by the workers without a copy). A model is
shipped again only when its fingerprint changes, as it does after training. The parent hands out batches in order
(encode sorts them longest first), the next one to whichever worker returns a result, and passes each result on as
it arrives.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np
import torch

from core.errors import UserError, env_seconds, shorten
from core.models.loading import model_fingerprint
from core.models.threads import free_cores, usable_cores

ENV = "CONTRASTLAB_ENCODE_WORKERS"
IDLE_ENV = "CONTRASTLAB_ENCODE_IDLE_S"
IDLE_S = 60.0  # how long idle workers are kept by default: a pause between encodes, not a session's whole life
BATCHES_PER_WORKER = 2  # fewer and the hand-over and the last batch's tail cost more than the pool saves
# Starting the workers takes about 6 s (importing torch twice), and on an idle machine two torch threads already
# encode about as fast as the pool (bench throughput): stopped workers are started only for an encode this long
# (4,096 texts at batch 64, ~9 s in-process), where a busy machine's gain (about 3x) pays for the start.
COLD_START_BATCHES = 64
ALIGN = 64  # byte alignment of each tensor in the shared weights file: a view of any dtype needs its itemsize
PARENT_CHECK_S = 1.0  # how often an idle worker checks that its parent still lives
STOP_WAIT_S = 5.0  # how long stop() lets a worker finish its batch before killing it
HF, CARD = "hf", "card"  # persistent ids of the Hugging Face model and the model card in a pickled Skeleton
# A worker's command line: a fresh interpreter, not multiprocessing's spawn, which re-imports the parent's __main__
# (an unguarded script would run again in each worker; Streamlit's launcher or a job worker would be imported there).
WORKER = "import sys; from core.models.encode_pool import serve; serve(int(sys.argv[1]), int(sys.argv[2]))"

SIGNALS = {sig.value: sig.name for sig in signal.Signals}  # what killed a worker, by name

Work = Callable[..., Any]  # work(model, texts, *args) -> a picklable result: the same function encode runs in-process
Handle = Callable[[np.ndarray, Any], None]  # handle(rows, result), called as each batch's result arrives


class WorkerError(RuntimeError):
    """A worker's exception, with its message; the worker and the pool carry on."""


def workers() -> int:
    """How many workers this environment allows: CONTRASTLAB_ENCODE_WORKERS when set (0 or 1: never; capped at the
    usable cores, 2 at least, so it can force the pool anywhere), else the usable cores capped by torch's threads
    now, so a process told to use one thread (a Ray task, a DDP rank, the test suite) is not given more this way."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return min(usable_cores(), torch.get_num_threads())
    try:
        wanted = int(value)
    except ValueError:  # not a whole number, or one past Python's digit limit
        wanted = -1
    if wanted < 0:
        raise UserError(f"{ENV} must be a whole number of encode worker processes (0 or 1: encode in-process), "
                        f"got {shorten(value)}.")
    return min(wanted, max(2, usable_cores()))


def pool_size(model, batches: int, attentions: bool = False) -> int:
    """The policy: how many workers an encode of `batches` batches uses, 0 for in-process.

    In-process when fewer than 2 workers are allowed (`workers`), with under BATCHES_PER_WORKER batches per worker
    (a small encode is quicker in-process), for a model not on the CPU, when attentions are asked for (per-text
    arrays the workers do not send back), when the first module's auto_model is not a plain Hugging Face model
    (core.training.top_layers.TopLayers reads states cached in this process), and where there is no memfd to share
    weights through (not Linux).
    """
    size = workers()
    if size < 2 or batches < BATCHES_PER_WORKER * size or attentions:
        return 0
    from transformers import PreTrainedModel  # a model is loaded by now: so is this

    if model.device.type != "cpu" or not isinstance(getattr(model[0], "auto_model", None), PreTrainedModel):
        return 0
    return size if hasattr(os, "memfd_create") else 0


def idle_seconds() -> float:
    """How long the workers may sit idle before they are stopped: CONTRASTLAB_ENCODE_IDLE_S seconds when set (0: right
    after each encode; beyond threading.TIMEOUT_MAX, about 292 years, capped there), else IDLE_S."""
    seconds = env_seconds(IDLE_ENV, IDLE_S, "the seconds idle encode workers are kept (a number >= 0; 0: stop them "
                          "after each encode)")
    return min(seconds, threading.TIMEOUT_MAX)


_pool: EncodePool | None = None
_pool_lock = threading.Lock()


def pool_for(model, batches: int, attentions: bool = False) -> EncodePool | None:
    """This process's pool, made (or resized) on first use, when `pool_size` says to use one and, for a pool not yet
    running, other work holds a core or CONTRASTLAB_ENCODE_WORKERS asks for it; else None. Its idle time is read
    here, on every call, so a bad CONTRASTLAB_ENCODE_IDLE_S is reported whether or not the pool is used, as a bad
    CONTRASTLAB_ENCODE_WORKERS is."""
    global _pool
    idle_s = idle_seconds()
    size = pool_size(model, batches, attentions)
    if not size:
        return None
    with _pool_lock:
        warm = _pool is not None and not _pool.closed and _pool.owner == os.getpid() and bool(_pool.procs)
        if batches < COLD_START_BATCHES and not (warm and _pool.size == size):
            return None
        if not warm and not os.environ.get(ENV, "").strip() and free_cores() >= usable_cores():
            # An idle machine: starting the workers (imports, 6-8 s) buys nothing over torch's own threads. After a
            # training run, 10,872 SST-2 texts took 29.7-35.3 s through a cold pool and 23.9-29.2 s in-process.
            return None
        if _pool is None or _pool.closed or _pool.owner != os.getpid() or _pool.size != size:
            if _pool is None:
                atexit.register(shutdown)
            else:
                _pool.close()
            _pool = EncodePool(size)
        _pool.idle_s = idle_s
        return _pool


def shutdown() -> None:
    """Stop this process's pool, if it has one (at exit; tests call it too)."""
    if _pool is not None:
        _pool.close()


class EncodePool:
    """`size` worker processes (`serve`), each with torch on one thread, started by the encode that needs them
    (`ship`) and stopped after `idle_s` seconds without one (`release`, `idle_stop`); one encode at a time (`run`)."""

    def __init__(self, size: int, idle_s: float = IDLE_S) -> None:
        self.size = size
        self.idle_s = idle_s  # pool_for sets it from CONTRASTLAB_ENCODE_IDLE_S before each encode
        self.owner = os.getpid()
        self.closed = False  # stopped for good (a failure, or shutdown): pool_for makes a new pool
        # The pool's lock, held only briefly: while an encode takes the workers (`encoding`) and hands them back, and
        # while the workers are stopped, so an idle stop and an encode never meet halfway. The encode itself runs
        # without it: `encoding` keeps other encodes and the idle stop off the workers meanwhile.
        self.state = threading.Condition()
        self.encoding = False
        self.timer: threading.Timer | None = None  # the idle stop, armed as each encode ends
        self.model_key: str | None = None  # fingerprint of the model every worker holds
        # (id, fingerprint) of models that could not be shipped: by identity too, since an equal model that can
        # be pickled (the same weights without the attribute pickle refused) must still be shipped
        self.unrunnable: set[tuple[int, str]] = set()
        self.busy: list[bool] = []  # a worker holds a task whose result is not read yet
        self.conns: list[Connection] = []
        self.procs: list[subprocess.Popen] = []  # empty until an encode starts them, and again once stopped

    def start(self) -> None:
        """Start the workers; they hold no model until `ship` sends one."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # what this process can import, as spawn does
        for _ in range(self.size):
            mine, theirs = socket.socketpair()  # a Unix socket: it can carry the weights' file descriptor too
            with theirs:  # closed here once the worker has it: a dead worker's pipe then reads as closed
                self.procs.append(subprocess.Popen([sys.executable, "-c", WORKER, str(theirs.fileno()),
                                                    str(self.owner)], pass_fds=[theirs.fileno()], env=env,
                                                   stdin=subprocess.DEVNULL))
            self.conns.append(Connection(mine.detach()))
        self.busy = [False] * self.size

    def run(self, model, texts: Sequence[str], batches: list[np.ndarray], work: Work, args: tuple,
            handle: Handle) -> bool:
        """work(model, the batch's texts, *args) for each batch (rows of `texts`) in the workers, handle(rows, result)
        as each arrives. False, with nothing done, when another thread's encode holds the pool or the model cannot
        be shipped (`ship`): the caller encodes in-process. A worker's exception or death raises RuntimeError with
        its message; an exception from handle (a cancelled progress) stops handing out batches and leaves the pool
        usable: the results still under way are dropped at the next call. Workers stopped while idle are started
        again (by `ship`, which sends them the model)."""
        with self.state:
            if self.encoding or self.closed:  # another encode has the workers, or a failure stopped them
                return False
            self.encoding = True
            self.disarm()  # an idle stop that fires from now on finds itself superseded
        try:
            with self.closing_on_failure():
                self.settle()
                if not self.ship(model):
                    return False
            with contextlib.closing(self.results(texts, batches, work, args)) as results:
                for rows, result in results:
                    handle(rows, result)
            return True
        finally:
            self.release()

    def release(self) -> None:
        """Hand the workers back as an encode ends: they are stopped after idle_s seconds unless another encode takes
        them first, at once when idle_s is 0."""
        with self.state:
            self.encoding = False
            self.state.notify_all()
            if self.closed or not self.procs:
                return
            if self.idle_s > 0:
                timer = threading.Timer(self.idle_s, lambda: self.idle_stop(timer))
                timer.daemon = True  # never keeps the process alive
                timer.name = "encode-pool-idle-stop"
                self.timer = timer
                timer.start()
                return
            procs = self.detach()
        reap(procs)

    def disarm(self) -> None:
        """Cancel the pending idle stop (under the pool's lock)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def idle_stop(self, timer: threading.Timer) -> None:
        """The idle timer's work: stop the workers unless the timer was superseded (an encode took the workers as it
        fired, or re-armed it since) or an encode holds them. The pool stays usable: its next encode starts workers
        again."""
        with self.state:
            if timer is not self.timer or self.encoding or self.closed:
                return
            self.timer = None
            procs = self.detach()
        reap(procs)

    @contextlib.contextmanager
    def closing_on_failure(self) -> Iterator[None]:
        """A failure mid-protocol (a dead or failing worker, an interrupt mid-message) leaves the pipes in an unknown
        state: stop the workers, so the next encode starts a fresh pool."""
        try:
            yield
        except (GeneratorExit, WorkerError):  # handle raised, or a worker answered with its error: all in order
            raise
        except BaseException:
            self.stop()
            raise

    def results(self, texts: Sequence[str], batches: list[np.ndarray], work: Work,
                args: tuple) -> Iterator[tuple[np.ndarray, Any]]:
        """(rows, result) of each batch as it arrives; each worker holds one batch at a time, so a batch goes out
        (in order) only when a worker is free, and the parent reads every result before it sends that worker more."""
        with self.closing_on_failure():
            queue = iter(batches)
            running: dict[int, np.ndarray] = {}

            def hand_out(worker: int) -> None:
                rows = next(queue, None)
                if rows is not None:
                    self.send(worker, ("batch", [texts[i] for i in rows], work, args))
                    running[worker] = rows

            for worker in range(self.size):
                hand_out(worker)
            while running:  # the busy workers are exactly those running a batch of this call
                worker, (status, result) = self.reply()
                if status == "error":
                    raise WorkerError(f"encode worker {worker} (pid {self.procs[worker].pid}) failed: {result}")
                rows = running.pop(worker)
                hand_out(worker)
                yield rows, result

    def settle(self) -> None:
        """Read and drop what a stopped call left under way (a cancelled encode's last batches), so none of it is
        mixed into this call."""
        while any(self.busy):
            self.reply()

    def ship(self, model) -> bool:
        """Give every worker `model` unless they hold it (same fingerprint), starting the workers first when there
        are none (the first encode, or the first after an idle stop). False when it cannot be pickled here or rebuilt
        there (a module class only this process knows: the worker prints why): encoded in-process."""
        key = model_fingerprint(model)
        if key == self.model_key:
            return True
        if (id(model), key) in self.unrunnable:
            return False
        tensors = list({id(t): t for _, t in chain(model.named_parameters(), model.named_buffers())}.values())
        try:
            skeleton = Skeleton.dumps(model, tensors)
        except (pickle.PicklingError, TypeError, AttributeError):  # what pickle raises for an object it cannot take
            self.unrunnable.add((id(model), key))
            return False
        if not self.procs:
            self.start()
        self.model_key = None
        layout, size, fd = share(tensors)
        try:
            for worker in range(self.size):
                self.send(worker, ("load", skeleton, layout, size), fd)
        finally:
            os.close(fd)  # the workers' copies keep the file alive
        if any([self.reply()[1][0] == "error" for _ in range(self.size)]):  # every worker's reply read
            self.unrunnable.add((id(model), key))
            return False
        self.model_key = key
        return True

    def send(self, worker: int, message: tuple, fd: int | None = None) -> None:
        """The message, then the file descriptor `fd` if given (passed over the pipe's Unix socket)."""
        try:
            self.conns[worker].send(message)
            if fd is not None:
                reduction.send_handle(self.conns[worker], fd, self.procs[worker].pid)
        except OSError:  # its end of the pipe is gone
            raise self.died(worker) from None
        self.busy[worker] = True

    def reply(self) -> tuple[int, tuple[str, Any]]:
        """The next reply from any busy worker: (worker, (status, payload)). Waits on every worker's pipe, so it
        raises as soon as any worker dies (its pipe reads as closed), never waiting on a pipe nobody will write to."""
        ready = wait(self.conns)
        worker = next((i for i, busy in enumerate(self.busy) if busy and self.conns[i] in ready), None)
        if worker is None:  # an idle worker's pipe is readable only when it closed
            raise self.died(self.conns.index(ready[0]))
        try:
            answer = self.conns[worker].recv()
        except (EOFError, OSError):
            raise self.died(worker) from None
        self.busy[worker] = False
        return worker, answer

    def died(self, worker: int) -> RuntimeError:
        proc = self.procs[worker]
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_WAIT_S)
        code = proc.returncode
        how = ("is still running but its pipe is closed" if code is None else
               f"was killed by signal {-code} ({SIGNALS.get(-code, 'unnamed')})" if code < 0 else
               f"exited with code {code}")
        return RuntimeError(f"encode worker {worker} (pid {proc.pid}) {how}; the encode was stopped "
                            f"(its traceback, if any, is on this process's stderr).")

    def close(self) -> None:
        """Stop the workers for good once no encode holds them (waiting at most STOP_WAIT_S for one)."""
        if os.getpid() != self.owner:
            return
        with self.state:
            self.state.wait_for(lambda: not self.encoding, STOP_WAIT_S)
        self.stop()

    def stop(self) -> None:
        """Stop the workers for good (`closed`: pool_for makes a new pool). Only in the process that started them: a
        forked child inherits this object but not the workers."""
        if os.getpid() != self.owner:
            return
        with self.state:
            self.closed = True
            self.disarm()
            procs = self.detach()
        reap(procs)

    def detach(self) -> list[subprocess.Popen]:
        """Under the pool's lock: ask each worker to leave and let go of it, its pipe closed (a worker blocked sending
        a result gets a broken pipe and leaves), so the pool holds no workers and no model; the workers to `reap`."""
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send(None)
            conn.close()
        procs = self.procs
        self.procs, self.conns, self.busy, self.model_key = [], [], [], None
        return procs


def reap(procs: list[subprocess.Popen]) -> None:
    """Give each worker told to leave STOP_WAIT_S to finish its batch, then kill it."""
    for proc in procs:
        try:
            proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def share(tensors: list[torch.Tensor]) -> tuple[list[tuple[torch.dtype, tuple[int, ...], int, bool]], int, int]:
    """The tensors copied into a new memfd: their layout (dtype, shape, byte offset, is a Parameter), its size and
    its fd."""
    layout, size = [], 0
    for tensor in tensors:
        layout.append((tensor.dtype, tuple(tensor.shape), size, isinstance(tensor, torch.nn.Parameter)))
        size += -(-tensor.numel() * tensor.element_size() // ALIGN) * ALIGN
    size = max(size, ALIGN)
    fd = os.memfd_create("contrastlab-encode-weights")
    try:
        os.ftruncate(fd, size)
        weights = torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=size, dtype=torch.uint8)
        for tensor, (dtype, shape, offset, _) in zip(tensors, layout):
            view(weights, dtype, shape, offset).copy_(tensor.detach())
    except BaseException:
        os.close(fd)
        raise
    return layout, size, fd


def view(weights: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...], offset: int) -> torch.Tensor:
    """One tensor of the shared weights file (a flat uint8 tensor), without a copy."""
    return weights[offset : offset + math.prod(shape) * dtype.itemsize].view(dtype).view(shape)


class Skeleton(pickle.Pickler):
    """Pickles a model without its weights, each one its index in the shared weights file; its Hugging Face model
    as HF, rebuilt in the worker from its class and config (`Rebuild`); its model card as CARD (not needed to encode,
    and after training it holds the losses)."""

    def __init__(self, file: io.BytesIO, index: dict[int, int], hf: torch.nn.Module, card: object) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.index = index
        self.hf = hf
        self.card = card

    @classmethod
    def dumps(cls, model, tensors: list[torch.Tensor]) -> bytes:
        """How to rebuild the Hugging Face model (its class, config and where each weight goes), then the model."""
        hf = model[0].auto_model
        index = {id(t): i for i, t in enumerate(tensors)}
        persistent = hf.state_dict(keep_vars=True).keys()
        places = [(name, index[id(t)], True, True) for name, t in hf.named_parameters(remove_duplicate=False)]
        places += [(name, index[id(t)], False, name in persistent)
                   for name, t in hf.named_buffers(remove_duplicate=False)]
        out = io.BytesIO()
        pickler = cls(out, index, hf, getattr(model, "model_card_data", None))
        pickler.dump((type(hf), hf.config, places))
        pickler.dump(model)  # the same pickler: what both share is pickled once
        return out.getvalue()

    def persistent_id(self, obj: object) -> object:
        if obj is self.hf:
            return HF
        if obj is self.card and obj is not None:
            return CARD
        return self.index.get(id(obj)) if isinstance(obj, torch.Tensor) else None


class Rebuild(pickle.Unpickler):
    """Unpickles a Skeleton, each weight a view of the shared weights file (one object per weight: tied weights stay
    tied).

    The Hugging Face model is constructed afresh (on the meta device, then given its weights) rather than unpickled:
    transformers learns what a model class can record (the hidden states encode asks for) only when one is
    constructed in the process, and the hooks it installs to record them are closures pickle cannot take.
    """

    def __init__(self, skeleton: bytes, layout: list, weights: torch.Tensor) -> None:
        super().__init__(io.BytesIO(skeleton))
        self.layout = layout
        self.weights = weights
        self.made: dict[int, torch.Tensor] = {}
        self.hf: torch.nn.Module | None = None

    def model(self):
        hf_class, config, places = self.load()
        with torch.device("meta"):
            self.hf = hf_class(config)
        for name, index, parameter, persistent in places:
            owner, _, leaf = name.rpartition(".")
            module = self.hf.get_submodule(owner)
            if parameter:
                module.register_parameter(leaf, self.tensor(index))
            else:
                module.register_buffer(leaf, self.tensor(index), persistent=persistent)
        if any(t.is_meta for t in chain(self.hf.parameters(), self.hf.buffers())):
            raise RuntimeError(f"{hf_class.__name__} built from its config has weights the shipped model lacks")
        return self.load().eval()

    def tensor(self, index: int) -> torch.Tensor:
        if index not in self.made:
            dtype, shape, offset, parameter = self.layout[index]
            tensor = view(self.weights, dtype, shape, offset)
            self.made[index] = torch.nn.Parameter(tensor, requires_grad=False) if parameter else tensor
        return self.made[index]

    def persistent_load(self, pid: object) -> object:
        return self.hf if pid == HF else None if pid == CARD else self.tensor(pid)


def unpack(skeleton: bytes, layout: list, size: int, fd: int):
    """The model a Skeleton describes, its weights mapped from the shared weights file `fd` (closed here)."""
    try:
        weights = torch.from_file(f"/proc/self/fd/{fd}", shared=False, size=size, dtype=torch.uint8)
    finally:
        os.close(fd)
    return Rebuild(skeleton, layout, weights).model()


def serve(fd: int, parent: int) -> None:
    """A worker process (WORKER) on its end `fd` of the pipe: torch on one thread, Ctrl-C left to the parent (the
    worker leaves when the parent does). It leaves without tearing the interpreter down (a second of CPU with torch
    loaded), having nothing to clean up; an exception that escapes `answer` (a message it cannot unpickle) ends it
    the usual way, traceback and all."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the fast tokenizer's own threads would compete too
    answer(Connection(fd), parent)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def answer(conn: Connection, parent: int) -> None:
    """Answers each message with ("ok", result) or ("error", its exception's type and message) until told to leave
    (None), or until the parent is gone: its pipe closed, or a new parent pid (a SIGKILLed parent may leave the pipe
    open in another child it forked)."""
    model = None
    while True:
        while not conn.poll(PARENT_CHECK_S):
            if os.getppid() != parent:
                return
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        kind, *body = message
        try:
            if kind == "load":
                fd = reduction.recv_handle(conn)
                model = None
                gc.collect()  # unmaps the previous model's weights before the next are mapped
                model = unpack(*body, fd)
                reply = ("ok", None)
            else:
                texts, work, args = body
                reply = ("ok", work(model, texts, *args))
        except Exception as exc:  # sent to the parent, which raises it; the traceback goes to the shared stderr
            traceback.print_exc()
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:  # the parent is gone
            return
