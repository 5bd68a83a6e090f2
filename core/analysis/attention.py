"""Where a model's attention goes for one text, reference vs fine-tuned: the last layer's attention per head and
the ATA token weights (docs/definitions.md, ATA pooling), and which tokens fine-tuning made matter more."""

from __future__ import annotations

import numpy as np
import torch

from core.errors import UserError
from core.models.ata import ata_weights
from core.models.encode import encode

TOP_CHANGES = 5
MAX_TOKENS = 128  # beyond this the per-head heatmaps are unreadable and heavy for the browser


def token_weights(model, text: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(tokens, ATA weights (S,), last-layer attention (heads, S, S)) of one text from one forward pass.

    The weights are computed from the attention here, so any transformer model has them, ATA-pooled or not.
    """
    found = encode(model, [text], attentions=True)
    attention = found.attentions[0]
    weights = ata_weights(torch.from_numpy(attention)[None], torch.ones(1, attention.shape[-1]))[0]
    return found.tokens[0], weights.numpy(), attention


def _side(model, text: str) -> tuple[list[str], dict]:
    tokens, weights, attention = token_weights(model, text)
    return tokens, {"attention": attention, "weights": weights}


def weight_changes(tokens: list[str], w_ref: np.ndarray, w_tuned: np.ndarray, top: int = TOP_CHANGES) -> dict:
    """The tokens that gained and lost the most ATA weight, largest change first (positions kept: tokens repeat)."""
    delta = np.asarray(w_tuned, dtype=np.float64) - np.asarray(w_ref, dtype=np.float64)
    order = np.argsort(-delta, kind="stable")

    def rows(positions) -> list[dict]:
        return [{"position": int(i), "token": tokens[i], "reference": float(w_ref[i]), "tuned": float(w_tuned[i]),
                 "delta": float(delta[i])} for i in positions]

    return {"gained": rows([i for i in order if delta[i] > 0][:top]),
            "lost": rows([i for i in order[::-1] if delta[i] < 0][:top])}


def compare_attention(reference, tuned, text: str) -> dict:
    """Tokens, last-layer attention (heads, S, S) and ATA weights (S,) for the reference and, when given, the
    fine-tuned model, plus `weight_changes` (top gained / lost tokens; None without a fine-tuned model).

    Raises UserError for an empty or over-long text, and when the two models split the text into different
    tokens (a run fine-tuned from another base model), since their weights could not be compared token by token.
    """
    if not text or not text.strip():
        raise UserError("Type a text first.")
    tokens, ref = _side(reference, text.strip())
    if len(tokens) > MAX_TOKENS:
        raise UserError(f"This text is {len(tokens)} tokens long; attention maps are shown up to {MAX_TOKENS} "
                        "tokens, so pick or type a shorter text.")
    result = {"tokens": tokens, "reference": ref, "tuned": None, "weight_changes": None}
    if tuned is not None:
        tuned_tokens, result["tuned"] = _side(tuned, text.strip())
        if tuned_tokens != tokens:
            raise UserError("The fine-tuned model splits this text into other tokens than the reference (it was "
                            "trained from another base model); pick a run fine-tuned from the reference model.")
        result["weight_changes"] = weight_changes(tokens, ref["weights"], result["tuned"]["weights"])
    return result
