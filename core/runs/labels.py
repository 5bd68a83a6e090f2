"""How a run is named wherever it appears: pickers, legends, tables, the sidebar, trade-off points.

One home, so every page names a run the same way; what a recipe's knob is called (margin, scale) and its
default come from the recipe registry, never from a copy.
"""

from __future__ import annotations

import time

from core.runs.store import Run
from core.training.recipes import RECIPES


def knob_value(config: dict) -> float | None:
    """The value of the recipe's knob (margin or scale) in a train config: its own, else the recipe's default;
    None when the recipe has no knob (an unknown recipe: the config's "margin", as saved)."""
    recipe = RECIPES.get(config.get("recipe", ""))
    if recipe is None:
        return config.get("margin")
    if recipe.knob_param is None:
        return None
    value = config.get(recipe.knob)
    return recipe.knob_param.default if value is None else value


def knob_name(recipe: str) -> str | None:
    """What a recipe's knob is called in labels ('margin', 'scale'); None without one."""
    knob = RECIPES[recipe].knob_param if recipe in RECIPES else None
    return knob.label.lower() if knob else None


def recipe_text(run: Run) -> str:
    if run.kind == "sweep":
        return ", ".join(run.config.get("recipes", []))
    return str(run.config.get("recipe", ""))


def knob_text(run: Run) -> str:
    """'margin 0.1', 'scale 20', 'margins 0.1, 1' for a sweep; '' when the recipe has no knob."""
    if run.kind == "sweep":
        names = {knob_name(r) for r in run.config.get("recipes", [])} - {None}
        first = (run.config.get("recipes") or [""])[0]
        key = RECIPES[first].knob if first in RECIPES else "margin"
        values = [knob_value({"recipe": first, key: m}) for m in run.config.get("margins", [])]
        shown = ", ".join("default" if v is None else f"{v:g}" for v in values)
        return f"{'/'.join(sorted(names)) or 'margin'}s {shown}" if shown else ""
    name, value = knob_name(run.config.get("recipe", "")), knob_value(run.config)
    if name is None or value is None:
        return ""
    return f"{name} {value:g}"


def shown_text(run: Run) -> str:
    """The settings the recipe names in labels beside its knob ('order curriculum'); '' for none or a sweep."""
    recipe = RECIPES.get(run.config.get("recipe", ""))
    if recipe is None or run.kind == "sweep":
        return ""
    return " · ".join(f"{recipe.param(name).label.lower()} {run.config.get(name, recipe.param(name).default)}"
                      for name in recipe.shown)


def run_label(run: Run) -> str:
    """Recipe, knob, shown settings and id ('triplet · margin 0.1 · <id>'); a sweep says so, an unfinished run its
    status."""
    parts = [f"sweep of {recipe_text(run)}" if run.kind == "sweep" else recipe_text(run) or run.kind,
             knob_text(run), shown_text(run), run.id, "" if run.status == "done" else run.status]
    return " · ".join(p for p in parts if p)


def run_reference(run: Run) -> str:
    """The model a run was compared against while training: its reference, else its base model."""
    return run.config.get("reference") or run.config["model"]


def duration_s(run: Run) -> float | None:
    """Wall time from start to finish (to now while running)."""
    if run.started is None:
        return None
    return (run.finished or time.time()) - run.started
