"""InfoNCE with a curriculum over hard-negative bands (docs/definitions.md, Multi-granularity hard negatives;
seed 004).

Every row carries an anchor, a positive and four hard negatives, one per band (N1 hardest .. N4 easiest). The loss
is MultipleNegativesRankingLoss (cosine, scale 20) over the anchor, the positive and the negative of the CURRENT
band only, with the other rows' positives and negatives as in-batch negatives. The trainer shuffles rows, so the
band cannot come from row order: a TrainerCallback (core.training.mgh) sets ``band`` from the step count
before each step, and only that column is embedded.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor, nn

BANDS = 4


class BandedMNRLoss(nn.Module):
    """MultipleNegativesRankingLoss over (anchor, positive, the current band's negative); ``band`` is 1-based."""

    def __init__(self, model, scale: float = 20.0, band: int = BANDS) -> None:
        super().__init__()
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        self.model = model
        self.inner = MultipleNegativesRankingLoss(model, scale=scale)
        self.band = band

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None) -> Tensor:
        features = list(sentence_features)
        if len(features) != 2 + BANDS:
            raise ValueError(f"expected anchor, positive and {BANDS} band negatives, got {len(features)} columns")
        if not 1 <= self.band <= BANDS:
            raise ValueError(f"band must be 1..{BANDS}, got {self.band}")
        return self.inner([features[0], features[1], features[1 + self.band]], labels)

    def get_config_dict(self) -> dict:
        return {"scale": self.inner.scale, "band": self.band}

    @property
    def citation(self) -> str:
        return self.inner.citation
