"""core.collector: importing core sets the garbage collector so that importing the training stack runs no full
collection, and a process that executes runs freezes its imports."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

from core import collector
from core.jobs import worker

ROOT = Path(__file__).resolve().parents[1]

# With Python's default thresholds the same imports ran 3 full collections (2 cores, measured).
IMPORT_TORCH = """
import gc, json
full = []
gc.callbacks.append(lambda phase, info: full.append(1) if phase == "stop" and info["generation"] == 2 else None)
import core, torch, scipy.stats
print(json.dumps({"full": len(full), "threshold": gc.get_threshold()}))
"""


def test_importing_torch_after_core_runs_no_full_collection():
    out = subprocess.run([sys.executable, "-c", IMPORT_TORCH], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    seen = json.loads(out)
    assert seen["threshold"][0] == collector.YOUNG_THRESHOLD
    assert seen["full"] == 0, seen


def test_tune_never_lowers_a_higher_threshold():
    before = gc.get_threshold()
    try:
        gc.set_threshold(10 * collector.YOUNG_THRESHOLD, 7, 9)
        collector.tune()
        assert gc.get_threshold() == (10 * collector.YOUNG_THRESHOLD, 7, 9)
        gc.set_threshold(700, 7, 9)
        collector.tune()
        assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, 7, 9)
    finally:
        gc.set_threshold(*before)


class _Node:
    """An object in a reference cycle: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_resolving_a_job_collects_the_garbage_then_freezes_what_is_alive():
    alive = [[] for _ in range(3)]
    garbage = weakref.ref(_Node())
    assert garbage() is not None  # a cycle outlives its last name until a collection
    worker._resolve("wait")
    assert garbage() is None  # collected, not frozen for good
    tracked = {id(o) for o in gc.get_objects()}
    assert not any(id(a) in tracked for a in alive)  # frozen: no collection walks them again


# A handler registered before `import core` runs after core's own (last in, first out): by then everything is frozen.
EXIT_FROZEN = """
import atexit, gc, sys
atexit.register(lambda: sys.stdout.write(str(gc.get_freeze_count())))
import core
kept = [[] for _ in range(1000)]
"""


def test_at_exit_everything_is_frozen_so_finalization_does_not_walk_the_imports_again():
    """A CLI command that had imported the training stack took 2.3-2.8 s to exit (2 cores), 0.4 s frozen."""
    out = subprocess.run([sys.executable, "-c", EXIT_FROZEN], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    assert int(out) > 1000
