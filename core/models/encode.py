"""Batched encoding: one forward pass per batch through the model's own modules gives the pooled embedding,
every layer's mean-pooled hidden state and (on request) the last layer's attention, plus a disk cache."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sentence_transformers.util import batch_to_device

from core.models.loading import model_fingerprint
from core.storage import embeddings_entry, load_array, save_array

Progress = Callable[[int, int], None]


@dataclass
class Encoded:
    embeddings: np.ndarray  # (n, d): the model's own pooled (and normalised, if it normalises) output
    layers: np.ndarray | None = None  # (n_layers + 1, n, hidden): masked mean of each hidden state; 0 = embeddings
    attentions: list[np.ndarray] | None = None  # per text: last-layer attention (heads, S, S), padding removed
    tokens: list[list[str]] | None = None  # per text, when attentions are requested


@contextmanager
def _eager_attention(hf_model: torch.nn.Module, needed: bool) -> Iterator[None]:
    """sdpa kernels return no attention probabilities; switch to eager only while they are needed."""
    previous = hf_model.config._attn_implementation
    if needed and previous != "eager":
        hf_model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if needed and previous != "eager":
            hf_model.set_attn_implementation(previous)


def _recording_view(transformer: torch.nn.Module, outputs: list[Any]) -> torch.nn.Module:
    """A shallow copy of the first module whose Hugging Face model appends each of its outputs to ``outputs``.

    The library's ``Transformer`` keeps only the last hidden state of that output, so the hidden states and
    attentions encode asks for are read from this record. The copy shares every weight and submodule, and
    nothing is set on the shared model, so concurrent forwards (two app sessions encoding with one cached
    model) never see each other's outputs.
    """
    hf_model = transformer.auto_model
    recorder = copy.copy(hf_model)

    @functools.wraps(hf_model.forward)
    def forward(*args: Any, **kwargs: Any) -> Any:
        output = hf_model.forward(*args, **kwargs)
        outputs.append(output)
        return output

    recorder.forward = forward
    view = copy.copy(transformer)
    view._modules = dict(transformer._modules)  # the copy shares this dict: replace it before swapping the model
    view.model = recorder
    return view


def _forward(model, texts: Sequence[str], layers: bool, attentions: bool) -> tuple[dict[str, Any], Any]:
    """Run the model's own modules once on a batch: (final features, the transformer's Hugging Face output).

    The first module gets the output requests as keyword overrides, only ever asking for more (a module whose
    pooling needs attentions asks for them itself); every later module runs as in the model's forward.
    """
    transformer, *rest = list(model)
    features = batch_to_device(model.preprocess(list(texts)), model.device)
    requests = {key: True for key, wanted in (("output_hidden_states", layers), ("output_attentions", attentions))
                if wanted}
    outputs: list[Any] = []
    features = _recording_view(transformer, outputs)(features, **requests)
    for module in rest:
        features = module(features)
    return features, outputs[-1]


def _mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


@torch.inference_mode()
def encode(
    model,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    layers: bool = False,
    attentions: bool = False,
    progress: Progress | None = None,
) -> Encoded:
    """Encode texts longest-first (less padding per batch), restoring the input order at the end."""
    texts = list(texts)
    n = len(texts)
    if n == 0:
        return Encoded(embeddings=np.zeros((0, model.get_embedding_dimension()), dtype=np.float32))
    order = np.argsort([-len(t) for t in texts], kind="stable")
    was_training = model.training
    model.eval()
    pooled, per_layer, attn, toks = [], [], [], []
    tokenizer = model.tokenizer
    try:
        with _eager_attention(model[0].auto_model, attentions):
            for start in range(0, n, batch_size):
                batch = [texts[i] for i in order[start : start + batch_size]]
                feats, out = _forward(model, batch, layers, attentions)
                pooled.append(feats["sentence_embedding"].float().cpu())
                mask = feats["attention_mask"]
                if layers:
                    per_layer.append(torch.stack([_mean_pool(h, mask) for h in out.hidden_states]).float().cpu())
                if attentions:
                    last = out.attentions[-1].float().cpu()
                    for row, ids in enumerate(feats["input_ids"]):
                        length = int(mask[row].sum())
                        attn.append(last[row, :, :length, :length].numpy())
                        toks.append(tokenizer.convert_ids_to_tokens(ids[:length].tolist()))
                if progress:
                    progress(min(start + batch_size, n), n)
    finally:
        model.train(was_training)
    inverse = np.argsort(order, kind="stable")
    result = Encoded(embeddings=torch.cat(pooled).numpy()[inverse])
    if layers:
        result.layers = torch.cat(per_layer, dim=1).numpy()[:, inverse]
    if attentions:
        result.attentions = [attn[i] for i in inverse]
        result.tokens = [toks[i] for i in inverse]
    return result


def count_overlong(model, texts: Sequence[str]) -> int:
    """How many texts the model will truncate (longer than its max_seq_length in tokens)."""
    limit = model.max_seq_length
    if not limit or not texts:
        return 0
    ids = model.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
    return int(sum(len(x) > limit for x in ids))


def encode_cached(
    model,
    texts: Sequence[str],
    *,
    layers: bool = False,
    batch_size: int = 64,
    progress: Progress | None = None,
    fingerprint: str | None = None,
) -> np.ndarray:
    """Pooled embeddings (n, d), or with layers=True the per-layer means (L+1, n, h), from cache when possible.

    Cached under embeddings_entry(), so re-plotting never re-encodes.
    """
    fingerprint = fingerprint or model_fingerprint(model)
    path = embeddings_entry(fingerprint, texts, "layers" if layers else "pooled")
    found = load_array(path, (None, len(texts), None) if layers else (len(texts), None))
    if found is not None:
        return found
    result = encode(model, texts, batch_size=batch_size, layers=layers, progress=progress)
    if layers:
        save_array(path, result.layers)
        pooled_path = embeddings_entry(fingerprint, texts, "pooled")
        if not pooled_path.exists():
            save_array(pooled_path, result.embeddings)
        return result.layers
    save_array(path, result.embeddings)
    return result.embeddings
