"""Margin sweeps: a grid of (recipe, knob value, seed) configurations over one corpus and reference model; the knob
is each recipe's margin or scale (Recipe.knob), stored under "margins" in the sweep's config, and "seeds" trains
each (recipe, value) that many times.

Each configuration is its own run (so it can be listed, compared and exported). With engine "local" (the default,
and every sweep saved before engines existed) they run one after another inside the sweep's worker: a GPU is not
shared well, and mining and the reference evaluation are cached, so they happen once for the whole sweep. With
engine "ray" each is a task on a Ray cluster, or on a local Ray instance (core.jobs.ray_sweep).
"""

from __future__ import annotations

import os

from core.errors import Cancelled, UserError, shorten
from core.jobs.ray_sweep import NO_RAY, check_address, ray_available, run_on_ray
from core.jobs.worker import execute
from core.runs.store import RunStore
from core.training.config import GENERAL_PARAMS, TrainConfig, for_recipe
from core.training.params import Param
from core.training.recipes import get_recipe

MAX_SEEDS = 20
ENGINES = ("local", "ray")  # where a sweep's configurations train: one after another here, or as Ray tasks
# Seeds per configuration: the same settings trained with seeds seed, seed + 1, ..., so the Trade-off page can show
# how far training alone moves a point (core.analysis.tradeoff.seed_groups).
SEEDS = Param("seeds", int, 1, "Seeds per configuration", "Train every configuration this many times, with seeds "
              "seed, seed + 1, ...; the Trade-off page shows them as one point, their mean with the seeds' "
              f"min–max. At most {MAX_SEEDS}.", low=1, high=MAX_SEEDS, step=1)


def sweep_config(base: dict, recipes: list[str], margins: list[float], seeds: object = 1, engine: object = "local",
                 address: object = None) -> dict:
    """Validate every grid point up front so a typo fails before hours of training, not in the middle. `engine` and
    `address`: see check_engine."""
    engine, address = check_engine(engine, address)
    if not recipes or not margins:
        raise UserError("A sweep needs at least one recipe and one margin.")
    for recipe in recipes:
        if get_recipe(recipe).knob is None:
            raise UserError(f"{get_recipe(recipe).title} has no margin or scale to sweep.")
    seeds = SEEDS.parse(seeds)
    first = _first_seed(base)
    if first + seeds - 1 > GENERAL_PARAMS["seed"].high:
        raise UserError(f"{seeds} seeds from seed {first} pass the largest seed, {GENERAL_PARAMS['seed'].high:.0f}; "
                        "start from a smaller seed.")
    config = {"base": base, "recipes": list(recipes), "margins": list(margins), "seeds": seeds, "engine": engine,
              "address": address}
    if any(point["nproc"] * point["nnodes"] > 1 for point in grid(config)):
        raise UserError("A sweep trains each configuration in one process; set nproc and nnodes to 1 (python -m core "
                        "train --nproc trains one run over several processes).")
    return config


def check_engine(engine: object, address: object) -> tuple[str, str | None]:
    """(engine, address) as stored: engine "local" or "ray" (which needs Ray installed); an address (a Ray cluster's,
    core.jobs.ray_sweep.check_address) only with engine "ray", where None starts a local Ray instance."""
    if not isinstance(engine, str) or engine.strip().lower() not in ENGINES:
        raise UserError(f"The sweep engine must be one of {', '.join(ENGINES)}, got {shorten(engine)}.")
    engine = engine.strip().lower()
    address = check_address(address)
    if engine == "local" and address is not None:
        raise UserError(f"A Ray address ({shorten(address, 60)}) needs engine ray; engine local trains here.")
    if engine == "ray" and not ray_available():
        raise UserError(NO_RAY)
    return engine, address


def _first_seed(base: dict) -> int:
    return GENERAL_PARAMS["seed"].parse(base.get("seed", GENERAL_PARAMS["seed"].default))


def grid(config: dict) -> list[dict]:
    """One complete train config per (recipe, value, seed): the base's settings that apply to the recipe, its knob
    set, the seed counted up from the base's, every default filled in and the reference resolved (TrainConfig), as
    every run stores its config. Sweeps saved before seeds existed train once per point."""
    first = _first_seed(config["base"])
    return [
        TrainConfig.from_dict({**for_recipe(config["base"], recipe), get_recipe(recipe).knob: margin,
                               "seed": first + i}).to_dict()
        for recipe in config["recipes"]
        for margin in config["margins"]
        for i in range(config.get("seeds", 1))
    ]


def cancel(store: RunStore, run_id: str) -> None:
    """Cancel a run; for a sweep also its queued and running children, which poll only their own flag (a sweep on Ray
    also cancels its tasks: core.jobs.ray_sweep)."""
    store.request_cancel(run_id)
    for child in store.list(sweep_id=run_id, with_losses=False):
        if child.status in ("queued", "running"):
            store.request_cancel(child.id)


def run_job(ctx) -> dict:
    """Worker entry point (core.jobs.worker.JOBS['sweep']): train and evaluate each grid point as a child run."""
    store: RunStore = ctx.store
    points = grid(ctx.config)
    if ctx.config.get("engine", "local") == "ray":
        children = run_on_ray(ctx, points)
    else:
        children = _run_here(ctx, points)
    results = []
    for child in children:
        run = store.get(child)
        results.append({"run_id": child, "recipe": run.config["recipe"],
                        "margin": run.config[get_recipe(run.config["recipe"]).knob], "status": run.status,
                        "after": run.metrics_after})
    ctx.progress(step=len(results), total=len(results), results=results)
    return {"runs": len(results), "done": sum(r["status"] == "done" for r in results)}


def _run_here(ctx, points: list[dict]) -> list[str]:
    """Engine local: each point in turn, in this process. Returns the child runs' ids."""
    store: RunStore = ctx.store
    corpus_name = store.get(ctx.run_id).corpus_name  # the children trained on the sweep's corpus
    children = []
    for i, cfg in enumerate(points):
        if ctx.should_stop():
            raise Cancelled()
        child = store.create("train", cfg, sweep_id=ctx.run_id, corpus_name=corpus_name)
        store.claim(child, os.getpid())
        knob = get_recipe(cfg["recipe"]).knob
        ctx.progress(phase=f"configuration {i + 1}/{len(points)}: {cfg['recipe']} {knob} {cfg[knob]}, "
                           f"seed {cfg['seed']}",
                     step=i, total=len(points), current_run=child)
        execute(store, child)
        children.append(child)
    return children
