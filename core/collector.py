"""Python's cyclic garbage collector, set for processes that import the training stack.

Importing torch, transformers and sentence-transformers leaves about 490,000 objects the collector tracks, nearly all
of them alive until the process ends. At Python's default first threshold (a young collection every 700 net
allocations) that import alone ran about 1,200 young, 100 middle and 7 full collections, each full one walking
everything imported so far: `import core.training.trainer` took 10.3-11.0 s of wall on the 2-core machine, 8.6 s with
YOUNG_THRESHOLD. Every full collection after it (the trainer's after training, accelerate's when it frees memory)
walked them all again, 0.29 s each, and about 0 s once they are frozen. In the test suite's two processes, full
collections took 114 s of wall in one run. Python's finalization walks them all once more: a CLI command that had
imported the training stack took 2.3-2.8 s to exit after its work was done, 0.4 s with everything frozen first.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc

YOUNG_THRESHOLD = 50_000  # net allocations between young collections (Python's default: 700)


def tune() -> None:
    """Young collections every YOUNG_THRESHOLD net allocations, the older generations at their usual ratios: the
    bulk imports then trigger no full collection. Garbage cycles wait a little longer (the young generation holds
    at most that many objects), and objects without cycles are freed at once as always.

    At exit, once the exit handlers registered after this call have run (atexit runs them last in, first out),
    every object moves to the permanent generation, so the interpreter's final collections skip them. It still
    joins threads, runs the handlers registered before this call and frees objects by their reference counts; only
    cycles are left to the process's end, as a cycle among frozen objects always is. Our files are flushed where
    they are closed (`with` blocks), never by a collection at exit."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
    atexit.unregister(gc.freeze)  # once, however often this is called
    atexit.register(gc.freeze)


def freeze_imports() -> None:
    """Collect, then move every surviving object to the permanent generation, which collections skip: for a process
    that has just imported the training stack and lives for runs (a worker, a standby, a DDP rank, the CLI running
    one in the foreground). What is frozen is freed by its reference count still; only a cycle among frozen
    objects stays until the process ends."""
    gc.collect()
    gc.freeze()


def release_memory() -> None:
    """Collect, then hand freed memory back to the system, which glibc otherwise keeps for reuse: after training
    (about 1.3 GB after a 2,000-triplet run, before the evaluation's arrays stack on top; bench/scale.py: worker peak
    RSS) and when a worker goes back on standby after a run (core.jobs.standby)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)
