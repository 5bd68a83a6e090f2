"""Training only the top n transformer layers from cached hidden states: the fast path of the quick margin point.

Why: with the embeddings and every layer below the top n frozen, the hidden state entering layer L - n is a fixed
function of a text's tokens. Computing it once per text (and caching it on disk, keyed like the other caches) and
then running only the top n layers forward and backward makes a training step and the after-evaluation about
L / n times cheaper; seed 002 reports that fine-tuning the last two layers gets close to full fine-tuning
(bench/quick.py measures how close on SST-2). docs/definitions.md, "Quick margin point", says what differs from a
full run: the frozen layers' dropout is not applied (their states are computed once, in evaluation mode).

`top_layers_view(model, n)` swaps the model's Hugging Face module for `TopLayers` while training and evaluating
run, so the trainer, the losses and core.models.encode work unchanged, and restores it afterwards: the weights
are shared, so the original model then holds the trained top layers and saves as a normal model. A batch that pads
much (a training batch, drawn at random) runs the top layers packed (core.training.packing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutput

from core.errors import UserError
from core.models import engine
from core.models.encode import longest_first
from core.models.loading import TOP_LAYER_TYPES, model_fingerprint, supports_top_layers
from core.models.threads import threads_for_free_cores
from core.storage import embeddings_entry, load_array, save_array
from core.training.packing import Pack, StandIn, packs, run_packed

BATCH = 64
PROBE = 8  # texts from each end of the length order that check a new ONNX graph against torch

Progress = Callable[[int, int], None]


def _key(ids: torch.Tensor | np.ndarray) -> bytes:
    """A text's cache key: its token ids, which are exactly what its frozen states depend on (a sentence embedding
    encodes one text, so token types are all 0)."""
    return np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64).tobytes()


class TopLayers(StandIn):
    """Stands in for a BERT-style Hugging Face model: the hidden state after layer `split` comes from `states`
    (computed on a miss with the frozen lower layers), then the layers from `split` on run as usual.

    Requests for hidden states or attentions (layer-wise curves, ATA pooling) run the whole model instead: those
    need every layer's output."""

    def __init__(self, hf: torch.nn.Module, split: int) -> None:
        super().__init__(hf)
        self.split = split
        self.states: dict[bytes, torch.Tensor] = {}  # key -> (length, hidden), float32 on the CPU
        self.misses = 0

    @torch.no_grad()
    def lower(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
              token_type_ids: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The hidden states entering the top layers, one (length, hidden) tensor per row, padding removed: the
        embeddings and the layers below the split only (running the whole model cost the layers above too)."""
        was_training = self.hf.training
        self.hf.eval()  # the frozen part without dropout: the same states every time
        try:
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            hidden = self.embed(input_ids=input_ids, **extra)
            mask = _attention_mask(self.hf.config, hidden, attention_mask)
            for layer in self.hf.encoder.layer[: self.split]:
                hidden = layer(hidden, mask)
        finally:
            self.hf.train(was_training)
        hidden = hidden.float().cpu()
        return [hidden[row, : int(length)].clone() for row, length in enumerate(attention_mask.sum(1).tolist())]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool | None = None,
                output_attentions: bool | None = None, **kwargs):
        if output_hidden_states or output_attentions:
            return self.whole(input_ids, attention_mask, token_type_ids, output_hidden_states=output_hidden_states,
                              output_attentions=output_attentions, **kwargs)
        lengths = attention_mask.sum(1).tolist()
        keys = [_key(input_ids[row, :n]) for row, n in enumerate(lengths)]
        missing = list({key: row for row, key in enumerate(keys) if key not in self.states}.values())
        if missing:
            self.misses += len(missing)
            rows = torch.tensor(missing, device=input_ids.device)
            width = int(max(lengths[row] for row in missing))
            types = None if token_type_ids is None else token_type_ids[rows, :width]
            for row, state in zip(missing, self.lower(input_ids[rows, :width], attention_mask[rows, :width], types)):
                self.states[keys[row]] = state
        dtype, top = next(self.hf.parameters()).dtype, self.hf.encoder.layer[self.split:]
        pack = Pack(attention_mask) if input_ids.device.type == "cpu" and packs(self.hf.config) else None
        if pack is not None and pack.worth:  # a training batch, drawn at random
            hidden = pack.place(torch.cat([self.states[key] for key in keys]).to(dtype))
            return run_packed(top, hidden, pack)
        hidden = torch.zeros(*input_ids.shape, self.hf.config.hidden_size, device=input_ids.device)
        for row, (key, n) in enumerate(zip(keys, lengths)):
            hidden[row, :n] = self.states[key].to(hidden.device)
        hidden = hidden.to(dtype)
        mask = _attention_mask(self.hf.config, hidden, attention_mask)
        for layer in top:
            hidden = layer(hidden, mask)
        return BaseModelOutput(last_hidden_state=hidden)


def _attention_mask(config, hidden: torch.Tensor, attention_mask: torch.Tensor):
    """The mask the model's layers take, as the model builds it from the padding mask."""
    # Imported here: it loads torch._dynamo (4 s of a CLI `quick` call that only asks supports_top_layers).
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask)


def split_layer(model, top: int) -> int:
    """The first trained layer's index, L - top; a UserError for an architecture or a count that cannot."""
    hf = model[0].auto_model
    model_type = getattr(hf.config, "model_type", None)
    layers = getattr(getattr(hf, "encoder", None), "layer", None)
    if not supports_top_layers(model_type) or not isinstance(layers, torch.nn.ModuleList):
        raise UserError(f"top_layers needs a BERT-style encoder ({', '.join(TOP_LAYER_TYPES)}); this model is "
                        f"{model_type or 'of an unknown type'}. Set top_layers to 0 to train every layer.")
    if not 0 < top <= len(layers):
        raise UserError(f"top_layers must be between 1 and {len(layers)}, the model's layers; got {top}.")
    return len(layers) - top


def prefill(view: TopLayers, model, texts: Sequence[str], progress: Progress | None = None,
            known: dict[bytes, torch.Tensor] | None = None) -> None:
    """Fill `view.states` for `texts` from the disk cache, computing (and caching) them when absent: one pass of
    the frozen model over the texts, longest first, in batches, for the texts whose states `known` lacks (those a
    full pass of the same weights recorded, record_frozen_states)."""
    texts = list(dict.fromkeys(texts))
    if not texts:
        return
    kind = f"frozen-below-{view.split}"
    fingerprint = model_fingerprint(model)
    states_path = embeddings_entry(fingerprint, texts, kind)
    tokens_path = embeddings_entry(fingerprint, texts, f"{kind}-tokens")
    states = load_array(states_path, (None, view.hf.config.hidden_size))
    tokens = load_array(tokens_path, (None, 2)) if states is not None else None
    if tokens is None or len(tokens) != len(states):
        with threads_for_free_cores() if model.device.type == "cpu" else nullcontext():  # beside others' work
            tokens, states = _compute(view, model, fingerprint, texts, progress, known or {})
        save_array(states_path, states)
        save_array(tokens_path, tokens)  # written last: its presence means both are complete
    bounds = np.flatnonzero(np.diff(tokens[:, 0])) + 1
    for ids, row_states in zip(np.split(tokens[:, 1], bounds), np.split(states, bounds)):
        view.states[_key(ids)] = torch.from_numpy(row_states)


@contextmanager
def record_frozen_states(model, top: int) -> Iterator[dict[bytes, torch.Tensor]]:
    """Within the block, each forward of `model` in this process in torch records, per text, the hidden state entering
    its top `top` layers, keyed as TopLayers keys its states: a top-layers run's before-evaluation, a full pass over
    the texts its frozen states are needed for, so gives them to prefill (the demo corpus's cold quick point: 1.9 s
    of frozen-layer pass saved). Encodes that run elsewhere (ONNX Runtime, encode workers) record nothing, and prefill
    computes what is missing."""
    split = split_layer(model, top)
    states: dict[bytes, torch.Tensor] = {}
    if split == 0:  # the states are the embeddings' output: computing them costs next to nothing
        yield states
        return
    hf = model[0].auto_model
    pad = hf.config.pad_token_id
    ids: list[torch.Tensor | None] = [None]

    def inputs(_module, _args, kwargs) -> None:
        ids[0] = kwargs.get("input_ids")

    def output(_module, _args, out) -> None:
        hidden = out[0] if isinstance(out, tuple) else out
        batch_ids, ids[0] = ids[0], None
        if batch_ids is None or pad is None or hidden.shape[:2] != batch_ids.shape:
            return  # not a batch this hook can key: prefill computes its states
        # a text's tokens end at its last non-padding one (padding is on the right, as TopLayers keys them)
        positions = torch.arange(1, batch_ids.shape[1] + 1, device=batch_ids.device)
        lengths = torch.where(batch_ids != pad, positions, 0).max(1).values.tolist()
        hidden = hidden.detach().float().cpu()
        for row, length in enumerate(lengths):
            states[_key(batch_ids[row, :length])] = hidden[row, :length].clone()

    # The Hugging Face model's own forward is called as a method (no module hooks run there): its embeddings are
    # called as a module, with the token ids.
    handles = [hf.embeddings.register_forward_pre_hook(inputs, with_kwargs=True),
               hf.encoder.layer[split - 1].register_forward_hook(output)]
    try:
        yield states
    finally:
        for handle in handles:
            handle.remove()


Lower = Callable[[dict[str, torch.Tensor]], list[torch.Tensor]]  # tokenized batch -> (length, hidden) per row


def _torch_lower(view: TopLayers, model) -> Lower:
    def lower(features: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        types = features.get("token_type_ids")
        return view.lower(features["input_ids"].to(model.device), features["attention_mask"].to(model.device),
                          None if types is None else types.to(model.device))

    return lower


def _lower(view: TopLayers, model, fingerprint: str, texts: list[str], order: np.ndarray) -> Lower:
    """The frozen layers' pass: the model's ONNX graph up to the split (core.models.engine) where it reproduces
    torch on the PROBE longest and shortest texts, else torch."""
    in_torch = _torch_lower(view, model)
    if not engine.applies(model):
        return in_torch

    def in_graph(graph: engine.Graph) -> Lower:
        run = graph.runner()

        def lower(features: dict[str, torch.Tensor]) -> list[torch.Tensor]:
            hidden = torch.from_numpy(run(features)[0])
            return [hidden[row, :length] for row, length in enumerate(features["attention_mask"].sum(1).tolist())]

        return lower

    def verify(graph: engine.Graph) -> float:
        features = model.preprocess([texts[i] for i in dict.fromkeys([*order[:PROBE], *order[-PROBE:]])])
        return max(float((a - b).abs().max()) for a, b in zip(in_torch(features), in_graph(graph)(features)))

    graph = engine.below_graph(model, fingerprint, view.split, len(texts), verify)
    return in_torch if graph is None else in_graph(graph)


def _compute(view: TopLayers, model, fingerprint: str, texts: list[str], progress: Progress | None,
             known: dict[bytes, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, states): for every token of every text, [text index, token id] and its hidden state; the frozen
    layers run only on the texts whose states `known` lacks."""
    order = longest_first(model, texts)
    lower_states = None
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for start in range(0, len(texts), BATCH):
        rows = order[start : start + BATCH]
        features = model.preprocess([texts[i] for i in rows])
        ids, lengths = features["input_ids"], features["attention_mask"].sum(1).tolist()
        states = [known.get(_key(ids[position, : int(n)])) for position, n in enumerate(lengths)]
        missing = [position for position, state in enumerate(states) if state is None]
        if missing:
            if lower_states is None:  # chosen at the first miss: no graph is exported when every state is known
                lower_states = _lower(view, model, fingerprint, texts, order)
            width = int(max(lengths[position] for position in missing))
            part = {name: value[missing, :width] for name, value in features.items()
                    if isinstance(value, torch.Tensor) and value.dim() == 2}
            for position, state in zip(missing, lower_states(part)):
                states[position] = state
        for position, (row, state) in enumerate(zip(rows, states)):
            found[int(row)] = (ids[position, : len(state)].cpu().numpy(), state.numpy())
        if progress:
            progress(min(start + BATCH, len(texts)), len(texts))
    tokens = [np.stack([np.full(len(found[i][0]), i), found[i][0]], axis=1) for i in range(len(texts))]
    return np.concatenate(tokens).astype(np.int64), np.concatenate([found[i][1] for i in range(len(texts))])


@contextmanager
def top_layers_view(model, top: int, texts: Sequence[str] = (), progress: Progress | None = None,
                    known: dict[bytes, torch.Tensor] | None = None) -> Iterator[TopLayers]:
    """Within the block, `model` runs only its top `top` layers from cached frozen states (prefilled for `texts`,
    from `known` where it has them: record_frozen_states); afterwards it is the plain model again, with whatever the
    block trained."""
    split = split_layer(model, top)
    transformer = model[0]
    hf = transformer.auto_model
    view = TopLayers(hf, split)
    prefill(view, model, texts, progress, known)
    transformer.model = view
    try:
        yield view
    finally:
        transformer.model = hf
