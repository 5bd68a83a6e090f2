"""Self-supervised recipes: InfoNCE with in-batch negatives on pairs cut from multi-sentence documents
(docs/definitions.md, Crop augmentation)."""

from __future__ import annotations

from core.training.examples import document_pairs
from core.training.params import Param
from core.training.recipe import PaperBudget, Recipe, knob


def _infonce(model, cfg):
    """MultipleNegativesRankingLoss; imported here because it loads torch (see supervised._losses)."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    return MultipleNegativesRankingLoss(model, scale=cfg.margin)


def _params(title: str) -> tuple[Param, ...]:
    return (
        # Seed 002: temperature 0.05, i.e. scale 20.
        knob("margin", "Scale", 20.0, (10.0, 20.0, 50.0),
             f"Presets for {title}; type another value to use it. Default 20."),
        Param("documents", str, None, "Documents", "A table of multi-sentence documents (default: the corpus's "
              "train texts).", optional=True, file=True),
        Param("crop_t", int, 2, "Sentences per crop (t)", "Sentences of 100-250 characters per chunk.", low=1,
              high=10),
        Param("pairs_per_doc", int, 1, "Pairs per document", "Distinct pairs drawn from each document. More pairs "
              "give longer runs without repeating a pair; two pairs of one document in a batch count as negatives "
              "of each other.", low=1, high=1000),
    )


# Batch 64 and lr 2e-5, one epoch, as seed 002; in-batch negatives must not see the same text twice in a batch.
_BUDGET = {"batch_size": 64, "lr": 2e-5}
# Seed 002's budget; the default 2,000 pairs (a third of it) keep a CPU run to minutes.
_PAPER_BUDGET = PaperBudget(100, 64, "seed 002, which finds most of the gain by then")

SELF_SUPERVISED = [
    Recipe("crop", "Crop augmentation (self-supervised)", "crop", _infonce, params=_params("crop augmentation"),
           knob="margin", examples=document_pairs, batch_sampler="no_duplicates", budget=_BUDGET,
           paper_budget=_PAPER_BUDGET, self_supervised=True),
    Recipe("dropout", "SimCSE dropout (self-supervised baseline)", "dropout", _infonce,
           params=_params("SimCSE dropout"), knob="margin", examples=document_pairs, batch_sampler="no_duplicates",
           budget=_BUDGET, paper_budget=_PAPER_BUDGET, self_supervised=True),
]
