"""Where a model's attention goes for one text, reference vs fine-tuned: every layer's attention per head, the ATA
token weights (docs/definitions.md, ATA pooling; last layer by definition), and which tokens fine-tuning made
matter more. One forward pass per model and text gives all layers, so showing another layer is a lookup."""

from __future__ import annotations

import inspect

import numpy as np
import torch
from sentence_transformers.util import batch_to_device

from core.errors import UserError
from core.models.ata import ata_weights
from core.models.encode import eager_attention

TOP_CHANGES = 5
# Tokens shown at most: beyond this the maps get heavy for the browser (12 heads x S x S per model and layer).
# all-MiniLM-L6-v2 reads 256 tokens, so it is shown whole; a longer model's texts are cut here (and said so).
MAX_TOKENS = 256


@torch.inference_mode()
def read_attention(model, text: str) -> dict:
    """One forward pass over `text`: {"tokens", "attention" (layers, heads, S, S), "weights" (S,), "length"}.

    The text is cut at the model's maximum length, or MAX_TOKENS if less; "length" is its full token count, so the
    page can say what was cut.
    The ATA weights come from the last layer's attention, so any transformer model has them, ATA-pooled or not.
    """
    hf_model = getattr(model[0], "auto_model", None)
    if hf_model is None:
        raise UserError("Attention maps need a transformer model; this model's first module has no attention.")
    length = len(model.tokenizer(text, add_special_tokens=True, truncation=False, return_attention_mask=False,
                                 return_token_type_ids=False, verbose=False)["input_ids"])
    limit = min(model.max_seq_length or MAX_TOKENS, MAX_TOKENS)
    features = batch_to_device(model.preprocess([text], max_length=limit), model.device)
    if not features["input_ids"].shape[-1]:
        raise UserError("The model reads no tokens in this text; type a text with words in it.")
    accepted = inspect.signature(hf_model.forward).parameters
    inputs = {key: value for key, value in features.items() if key in accepted}
    was_training = model.training
    model.eval()
    try:
        with eager_attention(hf_model):
            output = hf_model(**inputs, output_attentions=True, return_dict=True)
    finally:
        model.train(was_training)
    attention = torch.stack(output.attentions)[:, 0].float().cpu()  # (layers, heads, S, S): batch of one
    weights = ata_weights(attention[-1][None], torch.ones(1, attention.shape[-1]))[0]
    tokens = model.tokenizer.convert_ids_to_tokens(features["input_ids"][0].tolist())
    return {"tokens": tokens, "attention": attention.numpy(), "weights": weights.numpy(), "length": length}


def layer_attention(side: dict, layer: int) -> np.ndarray:
    """One layer's attention (heads, S, S) of a `read_attention` result; layers count from 1, as on the page."""
    layers = side["attention"].shape[0]
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 1 <= layer <= layers:
        raise UserError(f"Layer {layer!r} does not exist: this model has layers 1 to {layers}.")
    return side["attention"][layer - 1]


def _cut_note(length: int, shown: int, max_length: int | None) -> str | None:
    """What a page says when a text was cut (None when it was not): the model's own limit, or the maps' cap."""
    if length <= shown:
        return None
    if max_length and shown >= max_length:
        return (f"This text is {length} tokens long; the model reads only its first {shown} (its maximum length), "
                "so the maps show those.")
    return (f"This text is {length} tokens long; the maps show its first {shown} (the model run on those alone: "
            f"attention maps are capped at {MAX_TOKENS} tokens).")


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
    """Tokens, every layer's attention (layers, heads, S, S) and ATA weights (S,) for the reference and, when
    given, the fine-tuned model (one pass each), plus `weight_changes` (None without a fine-tuned model) and
    "note": what was cut from a long text, or None.

    Raises UserError for an empty text, and when the two models split the text into different tokens (a run
    fine-tuned from another base model), since their maps could not be compared token by token.
    """
    if not text or not text.strip():
        raise UserError("Type a text first.")
    found = read_attention(reference, text.strip())
    tokens = found.pop("tokens")
    note = _cut_note(found.pop("length"), len(tokens), reference.max_seq_length)
    result = {"tokens": tokens, "note": note, "reference": found, "tuned": None, "weight_changes": None}
    if tuned is not None:
        tuned_found = read_attention(tuned, text.strip())
        if tuned_found.pop("tokens") != tokens:
            raise UserError("The fine-tuned model splits this text into other tokens than the reference (it was "
                            "trained from another base model); pick a run fine-tuned from the reference model.")
        del tuned_found["length"]
        result["tuned"] = tuned_found
        result["weight_changes"] = weight_changes(tokens, found["weights"], tuned_found["weights"])
    return result
