"""Batched encoding: one forward pass per batch through the model's own modules gives the pooled embedding,
every layer's mean-pooled hidden state and (on request) the last layer's attention, plus a disk cache."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from core.models import encode_pool, engine
from core.models.loading import loaded, model_fingerprint
from core.models.threads import threads_for_free_cores
from core.storage import embeddings_entry, load_array, streamed_array

Progress = Callable[[int, int], None]
OVERLONG_CHUNK = 4096  # texts per tokenizer call in token_counts
SIZED_BATCHES = 4  # an in-process CPU encode this long samples the free cores first (0.1 s) to size torch's threads
PROBE = 8  # texts from each end of an encode's length order that check a new ONNX graph against torch
Target = Callable[[str, tuple[int, ...]], np.ndarray]  # ("pooled" or "layers", shape) -> array


@dataclass
class Encoded:
    embeddings: np.ndarray  # (n, d): the model's own pooled (and normalised, if it normalises) output
    layers: np.ndarray | None = None  # (n_layers + 1, n, hidden): masked mean of each hidden state; 0 = embeddings
    attentions: list[np.ndarray] | None = None  # per text: last-layer attention (heads, S, S), padding removed
    tokens: list[list[str]] | None = None  # per text, when attentions are requested


@dataclass
class Batch:
    """One batch's outputs, rows in the batch's order: what encode writes, and what a pool worker sends back."""

    pooled: np.ndarray  # (b, d)
    layers: np.ndarray | None = None  # (n_layers + 1, b, hidden)
    attentions: list[np.ndarray] | None = None
    tokens: list[list[str]] | None = None


@contextmanager
def eager_attention(hf_model: torch.nn.Module, needed: bool = True) -> Iterator[None]:
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
    from sentence_transformers.util import batch_to_device  # imported when a model runs: cached reads stay light

    transformer, *rest = list(model)
    features = batch_to_device(model.preprocess(list(texts)), model.device)
    requests = {key: True for key, wanted in (("output_hidden_states", layers), ("output_attentions", attentions))
                if wanted}
    outputs: list[Any] = []
    features = _recording_view(transformer, outputs)(features, **requests)
    for module in rest:
        features = module(features)
    return features, outputs[-1]


@torch.inference_mode()
def encode_batch(model, texts: Sequence[str], layers: bool, attentions: bool = False) -> Batch:
    """One batch through the model, as numpy: encode's unit of work, run in this process or in a pool worker."""
    feats, out = _forward(model, texts, layers, attentions)
    mask = feats["attention_mask"]
    batch = Batch(pooled=feats["sentence_embedding"].float().cpu().numpy())
    if layers:
        batch.layers = torch.stack([engine.mean_pool(h, mask) for h in out.hidden_states]).float().cpu().numpy()
    if attentions:
        last = out.attentions[-1].float().cpu()
        lengths = [int(m.sum()) for m in mask]
        batch.attentions = [last[row, :, :length, :length].numpy() for row, length in enumerate(lengths)]
        batch.tokens = [model.tokenizer.convert_ids_to_tokens(ids[:length].tolist())
                        for ids, length in zip(feats["input_ids"], lengths)]
    return batch


@torch.inference_mode()
def graph_batch(model, run: engine.Run, texts: Sequence[str], layers: bool) -> Batch:
    """One batch through the model's ONNX graph (`run`: core.models.engine.Graph.runner), the modules after the
    transformer in torch."""
    features = model.preprocess(list(texts))
    last, means = run(features)
    features["token_embeddings"] = torch.from_numpy(last)
    for module in list(model)[1:]:
        features = module(features)
    return Batch(pooled=features["sentence_embedding"].float().cpu().numpy(), layers=means if layers else None)


def _encoder_graph(model, texts: list[str], order: np.ndarray, fingerprint: str | None, attentions: bool
                   ) -> engine.Graph | None:
    """The model's ONNX graph for this encode, or None for torch; a new graph is checked on the encode's PROBE longest
    and PROBE shortest texts (truncation and padding both)."""
    if not engine.applies(model, attentions):
        return None
    probe = [texts[i] for i in dict.fromkeys([*order[:PROBE], *order[-PROBE:]])]

    def verify(graph: engine.Graph) -> float:
        reference, ours = encode_batch(model, probe, True), graph_batch(model, graph.runner(), probe, True)
        return max(float(np.abs(reference.pooled - ours.pooled).max()),
                   float(np.abs(reference.layers - ours.layers).max()))

    return engine.encoder_graph(model, fingerprint, len(texts), verify)


def _in_memory(_kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """encode's default target: a new array for each output."""
    return np.empty(shape, dtype=np.float32)


@torch.inference_mode()
def encode(
    model,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    layers: bool = False,
    attentions: bool = False,
    progress: Progress | None = None,
    into: Target = _in_memory,
    fingerprint: str | None = None,
) -> Encoded:
    """Encode texts longest-first (less padding per batch), each batch written straight to its rows of the outputs.

    into(kind, shape) gives the array the "pooled" or "layers" output is written to, asked once the first batch shows
    its shape: a new array by default, a cache entry's memmap in encode_cached, so a long encode streams to disk
    instead of holding its batches and then their concatenation in memory, and progress counts written rows.
    `fingerprint` (the model's, when the caller has it) names the model's ONNX graph.
    """
    model, texts = loaded(model), list(texts)
    n = len(texts)
    if n == 0:
        config = model[0].auto_model.config
        return Encoded(embeddings=np.zeros((0, model.get_embedding_dimension()), dtype=np.float32),
                       layers=np.zeros((config.num_hidden_layers + 1, 0, config.hidden_size), dtype=np.float32)
                       if layers else None)
    order = longest_first(model, texts)
    batches = [order[start : start + batch_size] for start in range(0, n, batch_size)]
    was_training = model.training
    model.eval()
    pooled = per_layer = None
    attn: list[np.ndarray] = [None] * n if attentions else []
    toks: list[list[str]] = [None] * n if attentions else []
    done = 0

    def write(rows: np.ndarray, batch: Batch) -> None:
        nonlocal pooled, per_layer, done
        if pooled is None:
            pooled = into("pooled", (n, *batch.pooled.shape[1:]))
        pooled[rows] = batch.pooled
        if layers:
            if per_layer is None:
                per_layer = into("layers", (batch.layers.shape[0], n, batch.layers.shape[2]))
            per_layer[:, rows] = batch.layers
        for i, att, tok in zip(rows, batch.attentions or [], batch.tokens or []):
            attn[i], toks[i] = att, tok
        done += len(rows)
        if progress:
            progress(done, n)

    try:
        # ONNX Runtime where the model's graph reproduces torch (core.models.engine); else on CPU, worker processes
        # of one thread each (core.models.encode_pool) when its policy says so; else torch in this process.
        graph = _encoder_graph(model, texts, order, fingerprint, attentions)
        if graph is not None:
            run = graph.runner()
            for rows in batches:
                write(rows, graph_batch(model, run, [texts[i] for i in rows], layers))
            return Encoded(embeddings=pooled, layers=per_layer)
        pool = encode_pool.pool_for(model, len(batches), attentions)
        if pool is None or not pool.run(model, texts, batches, encode_batch, (layers,), write):
            sized = model.device.type == "cpu" and len(batches) >= SIZED_BATCHES
            with eager_attention(model[0].auto_model, attentions), \
                    (threads_for_free_cores() if sized else nullcontext()):
                for rows in batches:
                    write(rows, encode_batch(model, [texts[i] for i in rows], layers, attentions))
    finally:
        model.train(was_training)
    return Encoded(embeddings=pooled, layers=per_layer, attentions=attn if attentions else None,
                   tokens=toks if attentions else None)


def token_counts(model, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
    """Each text's length in the model's tokens, special tokens included and before truncation.

    Tokenized in chunks for progress (100k texts take seconds), asking for the token ids only.
    """
    texts = list(texts)
    counts = np.zeros(len(texts), dtype=np.int64)
    for start in range(0, len(texts), OVERLONG_CHUNK):
        ids = model.tokenizer(texts[start : start + OVERLONG_CHUNK], add_special_tokens=True, truncation=False,
                              return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        counts[start : start + len(ids)] = [len(x) for x in ids]
        if progress:
            progress(min(start + OVERLONG_CHUNK, len(texts)), len(texts))
    return counts


def count_overlong(model, texts: Sequence[str], progress: Progress | None = None) -> int:
    """How many texts the model will truncate (longer than its max_seq_length in tokens)."""
    limit = model.max_seq_length
    texts = list(texts)
    if not limit or not texts:
        return 0
    return int((token_counts(model, texts, progress) > limit).sum())


def longest_first(model, texts: Sequence[str]) -> np.ndarray:
    """The order an encode batches texts in: longest first by token count, ties in text order, so each batch pads
    little. By characters, a third of SST-2's padded tokens were padding (10,872 texts, batch 32-64: 33-38% over
    the real tokens; by tokens 0.7-1.5%), and an encode took 1.2-1.3x as long; tokenizing for the order costs 0.13 s
    per 6,000 texts."""
    counts = token_counts(model, texts)
    limit = model.max_seq_length
    return np.argsort(-(np.minimum(counts, limit) if limit else counts), kind="stable")


def encode_cached(
    model,
    texts: Sequence[str],
    *,
    layers: bool = False,
    record_layers: bool = False,
    batch_size: int = 64,
    progress: Progress | None = None,
    fingerprint: str | None = None,
) -> np.ndarray:
    """Pooled embeddings (n, d), or with layers=True the per-layer means (L+1, n, h), from cache when possible.

    Cached under embeddings_entry(), so re-plotting never re-encodes. A miss streams each batch into its entry as it
    is encoded (storage.streamed_array), with the other entry (pooled beside layers; layers beside pooled when
    `record_layers`) written in the same pass when it is missing; an encode that fails or is cancelled leaves no
    entry.
    """
    fingerprint = fingerprint or model_fingerprint(model)
    kind = "layers" if layers else "pooled"
    path = embeddings_entry(fingerprint, texts, kind)
    found = load_array(path, (None, len(texts), None) if layers else (len(texts), None))
    if found is not None:
        return found
    model, entries = loaded(model), {kind: path}
    other = "pooled" if layers else "layers"
    if (layers or record_layers) and not (other_path := embeddings_entry(fingerprint, texts, other)).exists():
        entries[other] = other_path
    with ExitStack() as streams:
        def into(output: str, shape: tuple[int, ...]) -> np.ndarray:
            entry = entries.get(output)
            return streams.enter_context(streamed_array(entry, shape)) if entry else _in_memory(output, shape)

        result = encode(model, texts, batch_size=batch_size, layers="layers" in entries, progress=progress,
                        into=into, fingerprint=fingerprint)
    return np.array(result.layers if layers else result.embeddings)  # a copy: the caller must not write the entry
