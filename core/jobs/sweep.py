"""Margin sweeps: a grid of (recipe, knob value) configurations over one corpus and reference model; the knob is
each recipe's margin or scale (Recipe.knob), stored under "margins" in the sweep's config.

Each configuration is its own run (so it can be listed, compared and exported), executed one after another
inside the sweep's worker: a GPU is not shared well, and mining and the reference evaluation are cached,
so they happen once for the whole sweep.
"""

from __future__ import annotations

import os

from core.errors import Cancelled, UserError
from core.jobs.worker import execute
from core.runs.store import RunStore
from core.training.config import TrainConfig, for_recipe
from core.training.recipes import get_recipe


def sweep_config(base: dict, recipes: list[str], margins: list[float]) -> dict:
    """Validate every grid point up front so a typo fails before hours of training, not in the middle."""
    if not recipes or not margins:
        raise UserError("A sweep needs at least one recipe and one margin.")
    for recipe in recipes:
        if get_recipe(recipe).knob is None:
            raise UserError(f"{get_recipe(recipe).title} has no margin or scale to sweep.")
    config = {"base": base, "recipes": list(recipes), "margins": list(margins)}
    for point in grid(config):
        TrainConfig.from_dict(point)
    return config


def grid(config: dict) -> list[dict]:
    """One train config per (recipe, value): the base's settings that apply to the recipe, its knob set."""
    return [
        {**for_recipe(config["base"], recipe), get_recipe(recipe).knob: margin}
        for recipe in config["recipes"]
        for margin in config["margins"]
    ]


def cancel(store: RunStore, run_id: str) -> None:
    """Cancel a run; for a sweep also its queued and running children, which poll only their own flag."""
    store.request_cancel(run_id)
    for child in store.list(sweep_id=run_id, with_losses=False):
        if child.status in ("queued", "running"):
            store.request_cancel(child.id)


def run_job(ctx) -> dict:
    """Worker entry point (core.jobs.worker.JOBS['sweep']): train and evaluate each grid point as a child run."""
    store: RunStore = ctx.store
    points = grid(ctx.config)
    results = []
    for i, cfg in enumerate(points):
        if ctx.should_stop():
            raise Cancelled()
        child = store.create("train", cfg, sweep_id=ctx.run_id)
        store.claim(child, os.getpid())
        knob = get_recipe(cfg["recipe"]).knob
        ctx.progress(phase=f"configuration {i + 1}/{len(points)}: {cfg['recipe']} {knob} {cfg[knob]}",
                     step=i, total=len(points), current_run=child)
        execute(store, child)
        run = store.get(child)
        results.append({"run_id": child, "recipe": cfg["recipe"], "margin": cfg[knob], "status": run.status,
                        "after": run.metrics_after})
    ctx.progress(step=len(points), total=len(points), results=results)
    return {"runs": len(results), "done": sum(r["status"] == "done" for r in results)}
