"""A margin sweep on both engines (issue 15): four margins trained one after another in this process (engine local)
vs as four tasks on a local Ray instance with 2 CPUs (engine ray: 2 workers at a time, torch on 1 thread each).
The local sweep runs twice, with torch's own thread count and with 1 thread: on a busy machine torch's threads
wait for each other, so part of what Ray gains there comes from its 1-thread workers, not from running two at once.

Both arms run core.jobs.sweep.run_job through core.jobs.worker.execute, as the sweep's worker process does, on the
packaged all-MiniLM-L6-v2 and the demo corpus, same settings and seeds. The caches both arms read (the reference's
embeddings, the mined examples) are filled first, untimed, so neither arm pays for them. Ray's own start (ray.init)
is timed apart: a `python -m core sweep --engine ray` without an address pays it once per sweep, and the first
tasks also pay the Ray workers' imports (torch, sentence-transformers), which is inside the Ray arm's time. Each
margin's metrics must agree between the arms (torch's thread count may move the last digits).
"""

from __future__ import annotations

import math
import time

from bench.common import Options, header, line, load_note, ratio, set_seeds

MARGINS = (0.01, 0.1, 1.0, 5.0)
RAY_CPUS = 2


def _sweep(store, base: dict, engine: str) -> tuple[float, dict]:
    """Seconds for the whole sweep, and each margin's finished child run."""
    from core.jobs.sweep import sweep_config
    from core.jobs.worker import execute

    sweep = store.create("sweep", sweep_config(base, ["triplet"], list(MARGINS), engine=engine))
    set_seeds()
    t0 = time.perf_counter()
    execute(store, sweep)
    seconds = time.perf_counter() - t0
    run = store.get(sweep)
    children = {c.config["margin"]: c for c in store.list(sweep_id=sweep)}
    failed = [f"{c.config['margin']}: {c.status} {c.error}" for c in children.values() if c.status != "done"]
    if run.status != "done" or failed:
        raise RuntimeError(f"{engine} sweep {sweep} ended {run.status} ({run.error}); " + "; ".join(failed))
    return seconds, children


def _warm_caches(base: dict) -> None:
    """Fill what both arms would read from the cache (reference embeddings for mining and the before-evaluation,
    the mined examples), so the first arm does not pay for the second."""
    from core.data.kinds import load_any
    from core.evaluation.evaluate import EvalSettings, evaluate
    from core.jobs.ray_sweep import mine
    from core.jobs.sweep import grid, sweep_config
    from core.models.loading import load_model

    point = grid(sweep_config(base, ["triplet"], [MARGINS[0]]))[0]
    mine(point, lambda done, total: None)
    reference = load_model(point["reference"], point["device"])
    evaluate(reference, reference, load_any(point["corpus"]), EvalSettings(k=point["eval_k"]),
             model_name=point["model"])


def _max_diff(a: dict, b: dict) -> float:
    keys = [k for k, v in a.items() if isinstance(v, float) and isinstance(b.get(k), float)]
    if not keys:
        raise RuntimeError("no metrics to compare")
    return max(abs(a[k] - b[k]) for k in keys)


def run(opts: Options) -> None:
    import ray
    import torch

    from core.data.corpus import demo_corpus_path
    from core.runs.store import RunStore

    n_examples = 64 if opts.quick else 320
    base = {"corpus": str(demo_corpus_path()), "recipe": "triplet", "examples": n_examples,
            "batch_size": 16 if opts.quick else 32, "epochs": 1, "seed": 0, "device": "cpu"}
    store = RunStore()
    _warm_caches(base)
    threads = torch.get_num_threads()
    local_s, local = _sweep(store, base, "local")
    torch.set_num_threads(1)
    try:
        single_s, single = _sweep(store, base, "local")
    finally:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - t0
    try:
        ray_s, on_ray = _sweep(store, base, "ray")
    finally:
        ray.shutdown()

    header("sweep_engines: a 4-margin sweep, engine local vs engine ray (local instance)",
           f"all-MiniLM-L6-v2 on the demo corpus, triplet, margins {', '.join(f'{m:g}' for m in MARGINS)}, "
           f"{n_examples} mined triplets, batch {base['batch_size']}, 1 epoch, CPU, caches warm, {load_note()}")
    line(f"local, torch {threads} threads", f"{local_s:.1f} s")
    line("local, torch 1 thread", f"{single_s:.1f} s")
    line(f"ray: {RAY_CPUS} workers, 1 thread each", f"{ray_s:.1f} s  (+ ray.init {init_s:.1f} s)")
    line(f"speed-up local ({threads} threads) / ray", f"{ratio(local_s, ray_s)}  (with ray.init: "
                                                     f"{ratio(local_s, ray_s + init_s)})")
    line("speed-up local (1 thread) / ray", f"{ratio(single_s, ray_s)}  (with ray.init: "
                                            f"{ratio(single_s, ray_s + init_s)})")
    worst = 0.0
    for margin in MARGINS:
        runs = (local[margin], single[margin])
        after = max(_max_diff(run.metrics_after, on_ray[margin].metrics_after) for run in runs)
        before = max(_max_diff(run.metrics_before, on_ray[margin].metrics_before) for run in runs)
        loss = max(abs(run.progress["summary"]["train_loss"] - on_ray[margin].progress["summary"]["train_loss"])
                   for run in runs)
        worst = max(worst, after, before)
        p, s = on_ray[margin].metrics_after["polarity"], on_ray[margin].metrics_after["similarity"]
        line(f"margin {margin:g}: P / S on ray", f"{p:.2f} / {s:.2f}  (max |local - ray| after {after:.2e}, "
                                                  f"before {before:.2e}; train loss {loss:.2e})")
    same = worst < 1e-3 and math.isfinite(worst)
    line("same metrics per margin", f"{'yes' if same else 'NO'} (max abs difference {worst:.2e}, metrics in %)")
