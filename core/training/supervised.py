"""Supervised recipes: sentence-transformers' own losses on examples mined from the labels with the frozen
reference model."""

from __future__ import annotations

from core.training.params import Param
from core.training.recipe import MINING, Recipe, knob, needs_order, needs_scores


def _losses():
    """sentence-transformers' losses, imported on first use: they load torch, and the registry is read by the CLI
    and the pages before any training."""
    from sentence_transformers.sentence_transformer import losses

    return losses


def _triplet(model, cfg):
    losses = _losses()
    metric = {"cosine": losses.TripletDistanceMetric.COSINE, "euclidean": losses.TripletDistanceMetric.EUCLIDEAN}
    return losses.TripletLoss(model, distance_metric=metric[cfg.distance], triplet_margin=cfg.margin)


_MARGIN_HELP = "Presets for {title}; type another value to use it. Default {default:g}."
_PAIR_MARGINS = (0.1, 0.25, 0.5, 0.75, 1.0)
_SCALES = (5.0, 10.0, 20.0, 50.0)


def _margin(title: str, default: float, presets: tuple[float, ...], label: str = "Margin") -> Param:
    return knob("margin", label, default, presets, _MARGIN_HELP.format(title=title, default=default))


SUPERVISED = [
    # Seed 000 used cosine distance in TripletLoss (ST's default is Euclidean); cosine is our default.
    Recipe("triplet", "Triplet", "triplet", _triplet, knob="margin", params=(
        _margin("Triplet", 0.1, (0.01, 0.1, 1.0, 5.0, 7.5, 10.0)),
        Param("distance", str, "cosine", "Distance", "Seed 000 used cosine distance; sentence-transformers' "
              "default is Euclidean.", choices=("cosine", "euclidean")),
        *MINING)),
    Recipe("contrastive", "Contrastive", "contrastive", lambda m, c: _losses().ContrastiveLoss(m, margin=c.margin),
           knob="margin", params=(_margin("Contrastive", 0.5, _PAIR_MARGINS), *MINING)),
    Recipe("online_contrastive", "Online contrastive", "contrastive",
           lambda m, c: _losses().OnlineContrastiveLoss(m, margin=c.margin),
           knob="margin", params=(_margin("Online contrastive", 0.5, _PAIR_MARGINS), *MINING)),
    # In-batch negatives must not see the same text twice in a batch.
    Recipe("mnrl", "Multiple negatives ranking", "mnrl",
           lambda m, c: _losses().MultipleNegativesRankingLoss(m, scale=c.margin), batch_sampler="no_duplicates",
           knob="margin", params=(_margin("Multiple negatives ranking", 20.0, _SCALES, "Scale"), *MINING)),
    # On a pair corpus the cosine-format recipes train on its gold scores, rescaled to [0, 1].
    Recipe("cosine", "Cosine similarity (SetFit-style)", "cosine", lambda m, _c: _losses().CosineSimilarityLoss(m),
           params=MINING, kinds=("labelled", "pairs"), needs=needs_scores),
    # CoSENT and AnglE read only the order of the scores: NLI labels give one where a pair corpus has no scores.
    Recipe("cosent", "CoSENT", "cosine", lambda m, c: _losses().CoSENTLoss(m, scale=c.margin),
           knob="margin", params=(_margin("CoSENT", 20.0, _SCALES, "Scale"), *MINING), kinds=("labelled", "pairs"),
           needs=needs_order),
    Recipe("angle", "AnglE", "cosine", lambda m, c: _losses().AnglELoss(m, scale=c.margin),
           knob="margin", params=(_margin("AnglE", 20.0, _SCALES, "Scale"), *MINING), kinds=("labelled", "pairs"),
           needs=needs_order)
]
