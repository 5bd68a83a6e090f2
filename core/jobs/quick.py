"""Quick runs: a small-budget run of a config at one knob value (the trade-off page's margin slider), trained
once per value and reused."""

from __future__ import annotations

from core.errors import UserError
from core.jobs import launch
from core.runs.store import ACTIVE, RunStore
from core.training.config import TrainConfig
from core.training.recipes import get_recipe

# The quick model's budget: small enough to train in seconds on a CPU. Runs whose config has exactly this
# budget are "quick" (TrainConfig rejects extra keys, so the budget itself is the mark).
QUICK_BUDGET = {"examples": 256, "epochs": 1.0, "batch_size": 16, "max_steps": 0, "eval_every": 0}


def _full_config(config: dict) -> dict | None:
    """A config with every default filled in, so two spellings of the same run compare equal; None if invalid."""
    try:
        return TrainConfig.from_dict(config).to_dict()
    except UserError:
        return None


def is_quick(config: dict) -> bool:
    """A run trained with the quick budget (by the margin slider's button, or by hand with the same budget)."""
    full = _full_config(config) or config
    return all(full.get(key) == value for key, value in QUICK_BUDGET.items())


def quick_config(base_config: dict, value: float) -> dict:
    """The full config of the quick run for `base_config` with its recipe's knob at `value`; raises UserError
    if it is invalid or the recipe has no knob."""
    recipe = get_recipe(base_config.get("recipe", "triplet"))
    if recipe.knob is None:
        raise UserError(f"{recipe.title} has no margin or scale to vary.")
    return TrainConfig.from_dict({**base_config, **QUICK_BUDGET, recipe.knob: value}).to_dict()


def quick_run(store: RunStore, base_config: dict, value: float) -> str:
    """The run id of the quick model for this config and knob value: an existing queued, running or finished
    one (so each value trains once), else a new run started in a worker process."""
    config = quick_config(base_config, value)
    store.reap_orphans()  # a quick run whose worker died must not be waited for forever
    for run in store.list(kind="train", with_losses=False):
        if run.status in (*ACTIVE, "done") and _full_config(run.config) == config:
            return run.id
    run_id = store.create("train", config)
    try:
        launch.start(store, run_id)
    except BaseException:
        store.mark_failed(run_id, "The worker process could not be started.")
        raise
    return run_id
