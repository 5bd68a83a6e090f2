"""Distributed training overhead: a run over 2 processes (PyTorch DDP via torchrun, gloo on the CPU, each process
with 1 torch thread) against the same run in 1 process, on the same mined examples.

Every arm is a real run as `python -m core train` starts it (core.jobs.launch.start: a worker, or the DDP launcher
and its ranks), all-MiniLM-L6-v2 on the demo corpus, triplets mined at threshold 0 (3,730 available), TripletLoss
(cosine, margin 0.1), 1 epoch. The effective batch is the same in every arm (32: one process with 32, or two with 16
each) and the examples a multiple of it, so each arm takes the same optimiser steps over the same examples and
their losses compare. The arms:
- DDP 2 x 1 thread: two processes, one thread each;
- 1 process x 1 thread: the same threads per process;
- 1 process x 2 threads: the same cores as DDP.
Figures per arm: optimiser steps/s and examples/s of training alone (the run's own train_s), the wall time from
the start to the recorded result (process start, imports, evaluations before and after, saving), and the final
loss (the mean over the run and the last logged point). Arms alternate (A B C, C B A, ...), medians reported. On
a 2-core machine DDP is not expected to be faster; the point is that it trains the same and what it costs.
"""

from __future__ import annotations

import os
import statistics
import time

from bench.common import Options, header, line, load_note, ratio

BATCH = 32  # examples per optimiser step in every arm
ARMS = {  # name -> (processes, torch threads per process)
    "DDP 2 x 1 thread": (2, 1),
    "1 process x 1 thread": (1, 1),
    "1 process x 2 threads": (1, 2),
}
RUN_TIMEOUT_S = 1800


def _run(store, corpus: str, n_examples: int, nproc: int, threads: int, max_steps: int = 0) -> dict:
    """One run to its end as the CLI starts it, with `threads` torch threads per process; its figures."""
    from core.jobs import launch
    from core.training.config import TrainConfig

    cfg = TrainConfig(corpus=corpus, recipe="triplet", margin=0.1, distance="cosine", threshold=0.0,
                      examples=n_examples, epochs=1.0, max_steps=max_steps, batch_size=BATCH // nproc, seed=0,
                      device="cpu", nproc=nproc)
    run_id = store.create("train", cfg.to_dict())
    previous = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read by torch in the processes started now
    try:
        t0 = time.perf_counter()
        launch.start(store, run_id)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while (run := launch.poll(store, run_id)).active and time.monotonic() < deadline:
            time.sleep(0.2)
        wall = time.perf_counter() - t0
    finally:
        if previous is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = previous
    if run.status != "done":
        raise RuntimeError(f"run {run_id} ({nproc} process(es)) ended {run.status}: {run.error}")
    summary = run.progress["summary"]
    train_s = summary["timings"]["train_s"]
    return {"steps": summary["steps"], "steps_per_s": summary["steps"] / train_s,
            "examples_per_s": summary["steps"] * summary["effective_batch_size"] / train_s, "wall_s": wall,
            "train_loss": summary["train_loss"], "last_loss": run.losses[-1]["loss"], "examples": summary["examples"],
            "before": {k: v for k, v in run.before.items() if isinstance(v, float)}}


def run(opts: Options) -> None:
    from core.data.corpus import demo_corpus_path
    from core.runs.store import RunStore

    n_examples = 8 * BATCH if opts.quick else 64 * BATCH
    repeats = 1 if opts.quick else 3
    budget_s = 600 if opts.quick else 2400
    store = RunStore()  # the benchmark's own temporary home (bench/__main__.py)
    corpus = str(demo_corpus_path())
    _run(store, corpus, n_examples, 1, 2, max_steps=1)  # untimed: mines the examples and caches the embeddings
    results: dict[str, list[dict]] = {name: [] for name in ARMS}
    start = time.perf_counter()
    rounds = 0
    for r in range(repeats):
        t_round = time.perf_counter()
        for name in (list(ARMS) if r % 2 == 0 else list(ARMS)[::-1]):
            results[name].append(_run(store, corpus, n_examples, *ARMS[name]))
        rounds += 1
        now = time.perf_counter()
        if (now - start) + (now - t_round) > budget_s:  # the next round would likely end past the budget
            break

    med = {name: {key: statistics.median(r[key] for r in runs)
                  for key in ("steps_per_s", "examples_per_s", "wall_s", "train_loss", "last_loss")}
           for name, runs in results.items()}
    ddp, one, two = (med[name] for name in ARMS)
    steps = results["DDP 2 x 1 thread"][0]["steps"]
    header("ddp: a run over 2 processes (torchrun, gloo) vs 1 process, same examples and effective batch",
           f"all-MiniLM-L6-v2, demo corpus, {n_examples} mined triplets, TripletLoss (cosine, margin 0.1), effective "
           f"batch {BATCH}, {steps} steps, CPU, median of {rounds} interleaved round(s), {load_note()}")
    for name, m in med.items():
        line(name, f"{m['steps_per_s']:.2f} steps/s ({m['examples_per_s']:.1f} examples/s), wall {m['wall_s']:.1f} s, "
                   f"loss mean {m['train_loss']:.4f}, last {m['last_loss']:.4f}")
    line("steps/s DDP / 1 process x 1 thread", ratio(ddp["steps_per_s"], one["steps_per_s"]))
    line("steps/s DDP / 1 process x 2 threads", ratio(ddp["steps_per_s"], two["steps_per_s"]))
    line("wall DDP / 1 process x 2 threads", ratio(ddp["wall_s"], two["wall_s"]))
    line("same steps in every arm", "yes" if len({r["steps"] for runs in results.values() for r in runs}) == 1
         else "NO")
    first = [runs[0] for runs in results.values()]
    line("same examples and before-metrics", "yes" if all(r["examples"] == first[0]["examples"]
                                                          and r["before"] == first[0]["before"] for r in first)
         else "NO")
    line("final loss DDP - 1 process x 2 threads", f"{ddp['train_loss'] - two['train_loss']:+.4f} (mean over the run)")
