"""How many threads torch's CPU passes get: the usable cores that other work leaves free, not the cores present.

Beside a process spinning on both cores of a 2-core machine, an encode of 1,000 SST-2 texts with
all-MiniLM-L6-v2 took 13.8 s on torch's 2 threads and 8.0 s on 1 (quiet: 3.0 s and 5.2 s): each intra-op thread
waits at every operation for the slowest, which runs only when the scheduler gives it a core, so oversubscribed
threads lose far more than their share. One thread per free core keeps to that share.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import torch

SAMPLE_S = 0.1  # how long the cores' use is sampled: a short, current view (the load average lags by a minute)
BUSY_PERCENT = 50.0  # a core at least this busy with other work is taken


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, which a container or taskset narrows)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_cores(sample_s: float = SAMPLE_S) -> int:
    """The usable cores (this process's affinity) under BUSY_PERCENT use right now; at least 1."""
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    use = psutil.cpu_percent(interval=sample_s, percpu=True)
    cores = [use[i] for i in usable if i < len(use)] if usable is not None else use
    return max(1, sum(1 for percent in cores if percent < BUSY_PERCENT))


@contextmanager
def threads_for_free_cores() -> Iterator[int]:
    """torch's intra-op threads set to the free cores for the block (never more than it had: a Ray task, a DDP rank
    or OMP_NUM_THREADS may have set fewer), then restored; yields the count. On a GPU the CPU's threads matter
    little; callers use it for CPU passes."""
    before = torch.get_num_threads()
    threads = min(before, free_cores()) if before > 1 else before
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)
