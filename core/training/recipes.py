"""One registry maps a recipe name to (example format, loss factory, margin parameter and presets), so the
pages, the CLI and sweeps share it and a new loss is one entry. All losses are sentence-transformers' own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sentence_transformers.sentence_transformer import losses

from core.errors import UserError


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    example_format: str  # an examples.FORMATS entry, or "crop" / "dropout" for self-supervised pairs
    margin_name: str | None  # what the "margin" knob means for this loss (None: no such knob)
    default_margin: float | None
    presets: tuple[float, ...]
    factory: Callable  # (model, margin, distance) -> loss module
    self_supervised: bool = False

    def margin_or_default(self, margin: float | None) -> float | None:
        return self.default_margin if margin is None else margin

    def build_loss(self, model, margin: float | None = None, distance: str = "cosine"):
        margin = self.margin_or_default(margin)
        if margin is not None and margin < 0:
            raise UserError(f"The {self.margin_name} of {self.title} must not be negative (got {margin}).")
        return self.factory(model, margin, distance)


def _triplet(model, margin, distance):
    metric = {
        "cosine": losses.TripletDistanceMetric.COSINE,
        "euclidean": losses.TripletDistanceMetric.EUCLIDEAN,
    }.get(distance)
    if metric is None:
        raise UserError(f"Unknown triplet distance '{distance}'; use cosine or euclidean.")
    return losses.TripletLoss(model, distance_metric=metric, triplet_margin=margin)


def _mnrl(model, scale, _distance):
    return losses.MultipleNegativesRankingLoss(model, scale=scale)


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in [
        # Seed 000 used cosine distance in TripletLoss (ST's default is Euclidean); cosine is our default.
        Recipe("triplet", "Triplet", "triplet", "margin", 0.1, (0.01, 0.1, 1.0, 5.0, 7.5, 10.0), _triplet),
        Recipe("contrastive", "Contrastive", "contrastive", "margin", 0.5, (0.1, 0.25, 0.5, 0.75, 1.0),
               lambda m, margin, _d: losses.ContrastiveLoss(m, margin=margin)),
        Recipe("online_contrastive", "Online contrastive", "contrastive", "margin", 0.5,
               (0.1, 0.25, 0.5, 0.75, 1.0), lambda m, margin, _d: losses.OnlineContrastiveLoss(m, margin=margin)),
        Recipe("mnrl", "Multiple negatives ranking", "mnrl", "scale", 20.0, (5.0, 10.0, 20.0, 50.0), _mnrl),
        Recipe("cosine", "Cosine similarity (SetFit-style)", "cosine", None, None, (),
               lambda m, _margin, _d: losses.CosineSimilarityLoss(m)),
        Recipe("cosent", "CoSENT", "cosine", "scale", 20.0, (5.0, 10.0, 20.0, 50.0),
               lambda m, scale, _d: losses.CoSENTLoss(m, scale=scale)),
        Recipe("angle", "AnglE", "cosine", "scale", 20.0, (5.0, 10.0, 20.0, 50.0),
               lambda m, scale, _d: losses.AnglELoss(m, scale=scale)),
        # Seed 002: InfoNCE with in-batch negatives at temperature 0.05, i.e. MNRL with scale 20.
        Recipe("crop", "Crop augmentation (self-supervised)", "crop", "scale", 20.0, (10.0, 20.0, 50.0), _mnrl,
               self_supervised=True),
        Recipe("dropout", "SimCSE dropout (self-supervised baseline)", "dropout", "scale", 20.0,
               (10.0, 20.0, 50.0), _mnrl, self_supervised=True),
    ]
}


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise UserError(f"Unknown recipe '{name}'; choose one of {', '.join(RECIPES)}.") from None
