"""The registry of training recipes, read by the trainer, the CLI, the Train page, sweeps and run labels.
A new recipe is one module defining a ``Recipe`` plus one ``register(...)`` line (or list entry) here."""

from __future__ import annotations

from core.errors import UserError
from core.training.listmle import LISTMLE
from core.training.mgh import MGH
from core.training.params import Param
from core.training.raoe import RAOE
from core.training.recipe import Recipe
from core.training.self_supervised import SELF_SUPERVISED
from core.training.supervised import SUPERVISED

RECIPES: dict[str, Recipe] = {}


def register(recipe: Recipe) -> Recipe:
    """Add a recipe (replacing one of the same name)."""
    RECIPES[recipe.name] = recipe
    return recipe


for _recipe in [*SUPERVISED, *SELF_SUPERVISED, *RAOE, *LISTMLE, *MGH]:
    register(_recipe)


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise UserError(f"Unknown recipe '{name}'; choose one of {', '.join(RECIPES)}.") from None


def recipe_params() -> dict[str, list[tuple[Recipe, Param]]]:
    """Every recipe setting by name, with the recipes that have it (one CLI flag per name)."""
    found: dict[str, list[tuple[Recipe, Param]]] = {}
    for recipe in RECIPES.values():
        for param in recipe.params:
            found.setdefault(param.name, []).append((recipe, param))
    return found
