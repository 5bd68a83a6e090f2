"""ListMLE for a bi-encoder over ranked lists (docs/definitions.md, ListMLE post-training; seed 003, Eq. 5-8 and
Appendix D Algorithm 1).

sentence-transformers ships ListMLE for cross-encoders only. Here each training row is one list: its members are
the dataset's text columns in list order (member 0 first) and its label is the precomputed target matrix phihat
(L x L, flattened), a presence mask (L) and an anchor mask (L); shorter lists are padded with empty texts that the
presence mask leaves out. Each anchor's loss is the Plackett-Luce negative log-likelihood of the order of its phihat
row (over the other present members) under the model's cosines divided by tau. A list's loss is the SUM over its
anchors, as in the paper (Eq. 8); a batch's loss is the mean over its lists (the paper trains one list per step).

A list has one of two shapes: in a CHAIN list every member is an anchor and, for anchor i, the members from i
onward have a known order; in a STAR list only member 0's row has a known order, so it is the only anchor.
``nudged_targets`` forms phihat from a frozen teacher's similarities and the list order (Algorithm 1);
``order_targets`` is the order-only ablation.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from torch import Tensor, nn

PAD_GAP = 50.0  # padded logits sit this far below the smallest real one: exp(-50) vanishes beside any real term,
# and unlike -inf a finite value keeps the masked terms' gradient free of NaN
SHAPES = ("chain", "star")


def _row_nudge(row: np.ndarray, w: float) -> np.ndarray:
    """The signed nudge of a row whose expected order is its own order (index 0 first): each member moves by
    log(w |Delta| + 1), Delta = its value minus the value at the position where the teacher ranks it; up where the
    row's order puts it above the teacher's place for it, down where below, not at all where they agree."""
    place = np.empty(len(row), dtype=np.int64)  # p: the member's place in the row sorted descending
    place[np.argsort(-row, kind="stable")] = np.arange(len(row))
    delta = row - row[place]
    direction = np.sign(place - np.arange(len(row)))  # +1: the list ranks it higher than the teacher does
    return direction * np.log(w * np.abs(delta) + 1.0)


def nudged_targets(phi: np.ndarray, w: float, shape: str) -> np.ndarray:
    """phihat for one list from the teacher's (symmetric) similarities phi, members in list order (Algorithm 1).

    Chain: row i's members from i onward are nudged toward list order (the diagonal first) and the nudge is
    mirrored, so phihat stays symmetric and a teacher that already follows the chain is left as it is. Star: only
    row 0 is nudged (members 1.. in list order), nothing mirrored; the other rows are phi's and never trained.
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    phi = np.asarray(phi, dtype=np.float64)
    nudge = np.zeros_like(phi)
    for i in range(len(phi) if shape == "chain" else 1):
        nudge[i, i:] = _row_nudge(phi[i, i:], w)
    if shape == "chain":
        nudge += np.triu(nudge, 1).T  # Delta[j, i] = Delta[i, j], the same direction
    return phi + nudge


def order_targets(n: int) -> np.ndarray:
    """The order-only ablation: each row ranks the other members by their distance from it along the list (a higher
    value is more related), which is list order on row 0 and on each chain anchor's members either side of it."""
    place = np.arange(n, dtype=np.float64)
    return -np.abs(place[:, None] - place[None, :])


def pack_label(targets: np.ndarray, size: int, shape: str) -> list[float]:
    """The label of one list padded to `size` members: targets (size x size, flattened), the presence mask, then the
    anchor mask (every member of a chain list, member 0 of a star list)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    n = targets.shape[0]
    padded = np.zeros((size, size))
    padded[:n, :n] = targets
    mask = np.zeros(size)
    mask[:n] = 1.0
    anchors = mask.copy() if shape == "chain" else np.eye(size)[0]
    return [*padded.ravel().tolist(), *mask.tolist(), *anchors.tolist()]


def listmle_from_scores(scores: Tensor, targets: Tensor, mask: Tensor, anchors: Tensor, tau: float,
                        with_anchor: bool = False) -> Tensor:
    """ListMLE summed over each list's anchors, then averaged over the lists; scores and targets are (B, L, L),
    mask (B, L) marks the present members and anchors (B, L) the members whose row is trained (both 0/1).
    `with_anchor`: anchor j's own similarity s_jj is in its list, ranked first (Eq. 8 ranks s_j1 .. s_jn, s_jj
    included); without it (our default) only the other members are ranked."""
    size = scores.shape[-1]
    present = mask.bool()
    eye = torch.eye(size, dtype=torch.bool, device=scores.device)
    valid = present[:, None, :] & present[:, :, None]  # valid[b, j, k]: k is in anchor j's list
    if not with_anchor:
        valid = valid & ~eye
    else:  # the anchor is the most similar to itself, whatever the nudged targets of the others (they may pass 1)
        targets = targets.masked_fill(eye, float("inf"))
    order = torch.argsort(targets.masked_fill(~valid, float("-inf")), dim=-1, descending=True, stable=True)
    z = scores / tau
    floor = z.detach().min() - PAD_GAP
    logits = torch.gather(torch.where(valid, z, floor), -1, order)
    kept = torch.gather(valid, -1, order)
    tail = torch.logcumsumexp(logits.flip(-1), dim=-1).flip(-1)  # log sum_{m >= i} exp(z_pi(m))
    per_anchor = ((tail - logits) * kept).sum(-1)
    return (per_anchor * (anchors.bool() & present)).sum(-1).mean()


class ListMLELoss(nn.Module):
    """ListMLE over the cosines of each list's members, summed over a list's anchors and averaged over the lists of a
    batch; labels carry phihat, the presence mask and the anchor mask (pack_label). tau = 1 is the paper's (it has
    no temperature); a smaller tau sharpens the cosines."""

    def __init__(self, model, tau: float = 1.0, with_anchor: bool = False) -> None:
        super().__init__()
        if not tau > 0:
            raise ValueError("tau must be positive")
        self.model = model
        self.tau = tau
        self.with_anchor = with_anchor

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor) -> Tensor:
        members = [self.model(features)["sentence_embedding"] for features in sentence_features]
        return self.compute_loss_from_embeddings(members, labels)

    def compute_loss_from_embeddings(self, members: list[Tensor], labels: Tensor) -> Tensor:
        """The loss from each list position's (B, d) embeddings, member 0 first."""
        emb = nn.functional.normalize(torch.stack(members, dim=1), dim=-1)  # (B, L, d)
        size = emb.shape[1]
        labels = labels.to(emb.dtype)
        targets = labels[:, : size * size].reshape(-1, size, size)
        mask, anchors = labels[:, size * size: size * size + size], labels[:, size * size + size:]
        return listmle_from_scores(emb @ emb.transpose(1, 2), targets, mask, anchors, self.tau, self.with_anchor)

    def get_config_dict(self) -> dict:
        return {"tau": self.tau, "with_anchor": self.with_anchor}

    @property
    def citation(self) -> str:
        return ("@inproceedings{xia2008listwise, title={Listwise approach to learning to rank: theory and "
                "algorithm}, author={Xia, Fen and Liu, Tie-Yan and Wang, Jue and Zhang, Wensheng and Li, Hang}, "
                "booktitle={ICML}, year={2008}}")
