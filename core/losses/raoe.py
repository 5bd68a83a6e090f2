"""RAOE: a rank-margin term on the cosine plus an angular term gated by a teacher's score and an ordinal label.

Each batch row is a pair (text1, text2) with two labels: a continuous score ``s`` (higher = MORE related, e.g. a
teacher's cosine or a gold STS score) and an ordinal label ``l`` (0 = MOST related, e.g. NLI entailment 0 <
neutral 1 < contradiction 2). The two run in opposite directions on purpose; the masks below name the direction
each comparison expects. L_rank never orders two equal scores: they say nothing about which pair should be the
more related one. Ranks are average ranks (tied scores share the mean of their places), so which pairs L_rank keeps
never depends on where tied pairs sit in the batch (the released code orders tied scores by batch position; we do
not).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from sentence_transformers import SentenceTransformer, util
from sentence_transformers.base.losses.merged_forward import embed_columns
from torch import Tensor, nn

from core.errors import UserError

# arccos' gradient -1/sqrt(1 - c^2) is infinite at c = +-1 (identical or opposite embeddings); clamping c just
# inside [-1, 1] keeps it finite. It moves theta by at most ~1.4e-3 rad.
ANGLE_EPS = 1e-6
GATES = ("both", "label", "score")  # which of label and score select the pairs of L_angle


def batch_ranks(scores: Tensor) -> Tensor:
    """Average rank of each score within the batch, ascending from 0: equal scores share the mean of the places
    they fill (scores 1, 1, 1, 2, 2 rank 1, 1, 1, 3.5, 3.5), whatever their positions."""
    below = (scores[None, :] < scores[:, None]).sum(dim=1)
    equal = (scores[None, :] == scores[:, None]).sum(dim=1)
    return below + (equal - 1) / 2


def rank_pair_mask(scores: Tensor, interval: float) -> Tensor:
    """mask[i, j]: pair j outranks pair i by more than ``interval`` average ranks (r_j - r_i > interval), so it
    scores higher and its cosine should be the higher one. Tied scores share a rank, so they never pair up, and a
    tied group counts alike against every other score; at interval 0 these are CoSENT's pairs. Two different
    scores are at least one rank apart and rank differences are multiples of a half, so a fractional interval (a
    scaled I_eff) below 1 keeps every pair with s_j > s_i."""
    ranks = batch_ranks(scores)
    return (ranks[None, :] - ranks[:, None]) > interval


def gate_pair_mask(scores: Tensor, ordinal: Tensor, gate: str = "both") -> Tensor:
    """mask[i, j]: pair j is the more related one, so its angle should be the narrower one.

    ``gate`` says who decides: "both" the label and the score agree (l_i > l_j: j's label is closer to 0 = most
    related, and s_i < s_j: j's score is higher); "label" the label alone; "score" the score alone (ablations).
    """
    by_label = ordinal[:, None] > ordinal[None, :]
    by_score = scores[:, None] < scores[None, :]
    if gate == "label":
        return by_label
    if gate == "score":
        return by_score
    return by_label & by_score


def gated_share(scores: Tensor, ordinal: Tensor) -> float:
    """Among pairs (i, j) with l_i > l_j, the share that also has s_i < s_j; NaN when no such pair exists.

    High when score and label run in the directions stated above; low when one of them is flipped.
    """
    by_label = ordinal[:, None] > ordinal[None, :]
    total = int(by_label.sum())
    return int(gate_pair_mask(scores, ordinal).sum()) / total if total else math.nan


def _masked_logsumexp(logits: Tensor, mask: Tensor) -> Tensor:
    """log(1 + sum of exp(logits) over the mask): CoSENT's reduction, one logsumexp with a prepended 0."""
    kept = logits[mask]
    return torch.logsumexp(torch.cat((kept.new_zeros(1), kept)), dim=0)


class RAOELoss(nn.Module):
    """RAOE composite loss over pairs labelled with (score s, ordinal label l).

    With c_i the cosine of pair i, r_i the ascending average rank of s_i in the batch (ties share one) and
    theta_i = arccos(c_i):

    - L_rank = log(1 + sum over (i, j) with s_j > s_i and r_j - r_i > interval of exp(tau (c_i - c_j)))
    - L_angle = log(1 + sum over the gated (i, j) of exp(tau (theta_j - theta_i))); ``gate`` "both" (default)
      keeps pairs with l_i > l_j and s_i < s_j, "label" those with l_i > l_j, "score" those with s_i < s_j
    - L = w_rank L_rank + w_angle L_angle

    ``interval`` is in rank units of the batch the loss sees (a whole or fractional number >= 0), so the same value
    leaves out a larger share of the ordered pairs of a smaller batch; the recipes pass I_eff, the paper's I scaled
    to the run's batch (core.training.raoe.effective_interval). Tied scores never enter L_rank (equal scores say
    nothing about order), so with interval 0 L_rank is CoSENT with scale tau, ties included. A zero weight skips
    its term and a one-sided gate tests what the other side adds (ablations). After each batch
    ``last_gated_share`` holds the share of label-ordered pairs (l_i > l_j) whose scores agree (s_i < s_j), whatever
    the gate: it measures the data, not the loss.

    Labels: a float tensor (batch, 2), column 0 the score s, column 1 the ordinal label l. In a training dataset
    that is one ``label`` column holding [s, l] per pair (the trainer reads a single label column).

    Example::

        from datasets import Dataset
        from sentence_transformers import SentenceTransformerTrainer

        pairs = Dataset.from_dict({
            "sentence1": ["A plane is taking off.", "A man plays a flute.", "A dog runs."],
            "sentence2": ["An air plane is taking off.", "A man eats pasta.", "A cat sleeps."],
            "label": [[5.0, 0.0], [0.4, 2.0], [1.2, 1.0]],  # [s: higher = more related, l: 0 = most related]
        })
        trainer = SentenceTransformerTrainer(model=model, train_dataset=pairs, loss=RAOELoss(model))
        trainer.train()
    """

    def __init__(
        self, model: SentenceTransformer, tau: float = 20.0, interval: float = 2, w_rank: float = 1.0,
        w_angle: float = 1.0, gate: str = "both",
    ) -> None:
        super().__init__()
        if not tau > 0:
            raise UserError(f"RAOE's tau must be positive, got {tau}.")
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0 <= interval < math.inf:
            raise UserError(f"RAOE's interval is a number of ranks: a finite number >= 0, got {interval!r}.")
        if w_rank < 0 or w_angle < 0 or w_rank + w_angle == 0:
            raise UserError(f"RAOE's weights must be >= 0 and not both 0, got w_rank={w_rank}, w_angle={w_angle}.")
        if gate not in GATES:
            raise UserError(f"RAOE's gate must be one of {', '.join(GATES)}, got {gate!r}.")
        self.model = model
        self.tau = tau
        self.interval = interval
        self.w_rank = w_rank
        self.w_angle = w_angle
        self.gate = gate
        self.last_gated_share = math.nan

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor) -> Tensor:
        # Both columns are sentences of the same kind, so they share one padded forward pass.
        embeddings = embed_columns(self.model, sentence_features, separate_first=False)
        return self.compute_loss_from_embeddings(embeddings, labels)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor) -> Tensor:
        """The loss of one batch from the two columns' embeddings and the (batch, 2) labels."""
        if len(embeddings) != 2:
            raise UserError(f"RAOE needs pairs (two text columns), got {len(embeddings)} columns.")
        batch = embeddings[0].shape[0]
        if labels.shape != (batch, 2):
            raise UserError(f"RAOE needs labels of shape ({batch}, 2) (score, ordinal label), "
                            f"got {tuple(labels.shape)}.")
        cosines = util.pairwise_cos_sim(embeddings[0], embeddings[1])
        if cosines.dtype in (torch.float16, torch.bfloat16):
            cosines = cosines.float()
        scores, ordinal = labels[:, 0], labels[:, 1]
        self.last_gated_share = gated_share(scores, ordinal)

        loss = cosines.new_zeros(())
        if self.w_rank:
            # logits[i, j] = tau (c_i - c_j): penalised where j outranks i by score but i has the higher cosine.
            logits = self.tau * (cosines[:, None] - cosines[None, :])
            loss = loss + self.w_rank * _masked_logsumexp(logits, rank_pair_mask(scores, self.interval))
        if self.w_angle:
            theta = torch.arccos(cosines.clamp(-1 + ANGLE_EPS, 1 - ANGLE_EPS))
            # logits[i, j] = tau (theta_j - theta_i): penalised where the gate calls j the more related pair but
            # j has the wider angle.
            logits = self.tau * (theta[None, :] - theta[:, None])
            loss = loss + self.w_angle * _masked_logsumexp(logits, gate_pair_mask(scores, ordinal, self.gate))
        return loss

    def get_config_dict(self) -> dict[str, Any]:
        return {"tau": self.tau, "interval": self.interval, "w_rank": self.w_rank, "w_angle": self.w_angle,
                "gate": self.gate}

    @property
    def citation(self) -> str:
        return "RAOE: rank-margin and gated angular objective"
