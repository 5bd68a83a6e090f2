"""ListMLE for a bi-encoder over ranked lists (docs/definitions.md, ListMLE post-training; seed 003, Eq. 6-8).

sentence-transformers ships ListMLE for cross-encoders only. Here each training row is one list: its members are
the dataset's text columns in list order (member 0 = the anchor, rank 1) and its label is the precomputed target
matrix phihat (L x L, flattened) followed by a presence mask (L); shorter lists are padded with empty texts that the
mask leaves out. Every present member serves as an anchor over the other present members: the loss is the
Plackett-Luce negative log-likelihood of the order of phihat's row under the model's cosines divided by tau.

``nudged_targets`` forms phihat from a frozen teacher's similarities and the list order; ``order_targets`` is the
order-only ablation (the list order itself as the target).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from torch import Tensor, nn

PAD_GAP = 50.0  # padded logits sit this far below the smallest real one: exp(-50) vanishes beside any real term,
# and unlike -inf a finite value keeps the masked terms' gradient free of NaN


def _row_others(n: int, j: int) -> np.ndarray:
    return np.array([k for k in range(n) if k != j], dtype=np.int64)


def nudged_targets(phi: np.ndarray, w: float) -> np.ndarray:
    """phihat for one list whose members are in list order (index 0 = rank 1).

    For anchor j and each other member k: r(k) = k's place in the list without j, rhat(k) = the place of phi[j, k]
    in row j without j (descending, ties by position), phi_sorted = that row sorted descending. The teacher's score
    moves by m = log(w * |phi[j, k] - phi_sorted[r(k)]| + 1): up where the list ranks k higher than the teacher
    does, down where lower. The diagonal stays phi[j, j]; it is never a target.
    """
    phi = np.asarray(phi, dtype=np.float64)
    n = phi.shape[0]
    out = phi.copy()
    for j in range(n):
        others = _row_others(n, j)
        row = phi[j, others]
        order = np.argsort(-row, kind="stable")
        rhat = np.empty(len(others), dtype=np.int64)
        rhat[order] = np.arange(len(others))
        r = np.arange(len(others))  # the list's own order
        nudge = np.log(w * np.abs(row - row[order][r]) + 1.0)
        out[j, others] = np.where(r < rhat, row + nudge, np.where(r > rhat, row - nudge, row))
    return out


def order_targets(n: int) -> np.ndarray:
    """The order-only ablation: every row ranks the other members in list order (a higher value is more related)."""
    return -np.tile(np.arange(n, dtype=np.float64), (n, 1))


def pack_label(targets: np.ndarray, size: int) -> list[float]:
    """The label of one list padded to `size` members: targets (size x size, flattened) then the presence mask."""
    n = targets.shape[0]
    padded = np.zeros((size, size))
    padded[:n, :n] = targets
    mask = np.zeros(size)
    mask[:n] = 1.0
    return [*padded.ravel().tolist(), *mask.tolist()]


def listmle_from_scores(scores: Tensor, targets: Tensor, mask: Tensor, tau: float) -> Tensor:
    """Mean over present anchors of the ListMLE loss; scores and targets are (B, L, L), mask (B, L) of 0/1."""
    size = scores.shape[-1]
    present = mask.bool()
    eye = torch.eye(size, dtype=torch.bool, device=scores.device)
    valid = present[:, None, :] & present[:, :, None] & ~eye  # valid[b, j, k]: k is one of anchor j's others
    order = torch.argsort(targets.masked_fill(~valid, float("-inf")), dim=-1, descending=True, stable=True)
    z = scores / tau
    floor = z.detach().min() - PAD_GAP
    logits = torch.gather(torch.where(valid, z, floor), -1, order)
    kept = torch.gather(valid, -1, order)
    tail = torch.logcumsumexp(logits.flip(-1), dim=-1).flip(-1)  # log sum_{m >= i} exp(z_pi(m))
    per_anchor = ((tail - logits) * kept).sum(-1)
    anchors = kept.any(-1)
    return per_anchor[anchors].mean()


class ListMLELoss(nn.Module):
    """ListMLE over the cosines of each list's members; labels carry phihat and the presence mask (pack_label)."""

    def __init__(self, model, tau: float = 0.05) -> None:
        super().__init__()
        if not tau > 0:
            raise ValueError("tau must be positive")
        self.model = model
        self.tau = tau

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor) -> Tensor:
        members = [self.model(features)["sentence_embedding"] for features in sentence_features]
        return self.compute_loss_from_embeddings(members, labels)

    def compute_loss_from_embeddings(self, members: list[Tensor], labels: Tensor) -> Tensor:
        """The loss from each list position's (B, d) embeddings, member 0 first."""
        emb = nn.functional.normalize(torch.stack(members, dim=1), dim=-1)  # (B, L, d)
        size = emb.shape[1]
        labels = labels.to(emb.dtype)
        targets = labels[:, : size * size].reshape(-1, size, size)
        mask = labels[:, size * size:]
        return listmle_from_scores(emb @ emb.transpose(1, 2), targets, mask, self.tau)

    def get_config_dict(self) -> dict:
        return {"tau": self.tau}

    @property
    def citation(self) -> str:
        return ("@inproceedings{xia2008listwise, title={Listwise approach to learning to rank: theory and "
                "algorithm}, author={Xia, Fen and Liu, Tie-Yan and Wang, Jue and Zhang, Wensheng and Li, Hang}, "
                "booktitle={ICML}, year={2008}}")
