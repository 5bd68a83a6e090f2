"""Quick runs: a small-budget run of a config at one knob value (the trade-off page's margin slider), trained
once per value and reused. A quick run trains only the model's top QUICK_TOP layers from cached frozen states
(core.training.top_layers) where the architecture allows; `full=True` retrains the same point with every layer."""

from __future__ import annotations

from core.errors import UserError
from core.jobs import launch
from core.models.loading import layer_count, model_type, supports_top_layers
from core.runs.store import ACTIVE, RunStore
from core.training.config import TrainConfig
from core.training.recipes import get_recipe

# The quick model's budget: small enough to train in seconds on a CPU. Runs whose config has exactly this
# budget are "quick" (TrainConfig rejects extra keys, so the budget itself is the mark).
QUICK_BUDGET = {"examples": 256, "epochs": 1.0, "batch_size": 16, "max_steps": 0, "eval_every": 0}
QUICK_RECIPE = "triplet"  # the margin slider's objective: seed 000's margin trend is TripletLoss's
QUICK_TOP = 2  # layers a quick point trains: seed 002 finds the last two close to full fine-tuning (bench/quick.py)


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


def quick_text(config: dict) -> str:
    """'top-2 quick' for a quick run that trained the top layers only, 'quick' for one that trained every layer,
    '' for any other run: so a quick point is never taken for a full run."""
    if not is_quick(config):
        return ""
    return f"top-{config['top_layers']} quick" if config.get("top_layers") else "quick"


def quick_top_layers(model: str | None) -> int:
    """QUICK_TOP for a BERT-style model with more layers than that, else 0 (every layer trains)."""
    layers = layer_count(model)
    return QUICK_TOP if supports_top_layers(model_type(model)) and layers and layers > QUICK_TOP else 0


def quick_config(base_config: dict, value: float, full: bool = False) -> dict:
    """The full config of the quick run for `base_config` with its recipe's knob at `value`, training the top
    layers only unless `full` and scoring the trade-off only (P@k and S@k, the point the slider adds: half the
    evaluation on a large corpus); raises UserError if it is invalid or the recipe has no knob."""
    recipe = get_recipe(base_config.get("recipe", QUICK_RECIPE))
    if recipe.knob is None:
        raise UserError(f"{recipe.title} has no margin or scale to vary.")
    top = 0 if full else quick_top_layers(base_config.get("model"))
    return TrainConfig.from_dict({**base_config, **QUICK_BUDGET, recipe.knob: value, "freeze_layers": 0,
                                  "top_layers": top, "trade_off_only": True}).to_dict()


def find_quick(store: RunStore, config: dict) -> str | None:
    """A queued, running or finished run of exactly this config (so each value trains once); stored configs are
    completed as TrainConfig completes `config`, so a run saved before the reference was stored resolved still
    counts."""
    store.reap_orphans()  # a quick run whose worker died must not be waited for forever
    for run in store.list(kind="train", with_losses=False):
        if run.status in (*ACTIVE, "done") and _full_config(run.config) == config:
            return run.id
    return None


def quick_run(store: RunStore, base_config: dict, value: float, full: bool = False,
              corpus_name: str | None = None) -> str:
    """The run id of the quick model for this config and knob value: an existing queued, running or finished
    one, else a new run started in a worker process (a waiting standby when there is one). `corpus_name` is
    recorded with a new run (RunStore.create)."""
    config = quick_config(base_config, value, full)
    found = find_quick(store, config)
    if found is not None:
        return found
    run_id = store.create("train", config, corpus_name=corpus_name)
    try:
        launch.start(store, run_id)
    except BaseException:
        store.mark_failed(run_id, "The worker process could not be started.")
        raise
    return run_id
