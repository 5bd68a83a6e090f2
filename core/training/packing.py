"""Padding-free training steps: a batch's texts packed several to a row, each token attending only to its own text's
(a block-diagonal mask) and each text with its own positions, so the layers compute little padding.

Why: the trainer draws its batches at random, so every text is padded to the batch's longest: 16 SST-2 texts
computed 2.66x their real tokens, 32 texts 3.03x. A triplet step of sentence-transformers embeds the positives and
negatives as one batch of 64 (740-990 real tokens, 2,800-3,600 padded). Rows as wide as the longest text keep each
row's attention as small as a padded row's; one row of every token (a 740-990 square mask per head) spent its time
in attention and its dropout. 4 such batches of all-MiniLM-L6-v2, forward and backward, in one run (2 cores): padded
5.6-6.5 s, one row 4.6-4.7 s, rows of 64 tokens in text order 2.0-2.1 s, as here 1.7-1.9 s. A 320-triplet run
trained in 8.0 s packed as here against 25.6 s padded.

`packed_training(model)` has a BERT-style model's training forwards run through `Packed`, which shares the model's
weights; the quick point's TopLayers (core.training.top_layers) packs its own batches the same way, through `Pack`.
A batch packs only when that saves rows (a sorted evaluation batch rarely does). On a GPU the padded batch's extra
tokens run in parallel and nothing here has been measured, so only CPU models are packed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from transformers.modeling_outputs import BaseModelOutput

from core.models.loading import TOP_LAYER_TYPES

# Whose positions count from pad_token_id + 1 (fairseq's layout) instead of 0.
OFFSET_POSITIONS = ("roberta", "xlm-roberta")
MASKED_ATTENTION = ("sdpa", "eager")  # attention implementations that add a given 4D mask to their scores


class Pack:
    """Where each text of a right-padded batch goes in its packed form: texts are placed longest first into the
    first row with room left, rows as wide as the batch's longest text, so a packed batch has the padded batch's
    width and at most its rows, and never costs more."""

    def __init__(self, attention_mask: torch.Tensor) -> None:
        self.shape = tuple(attention_mask.shape)
        lengths = attention_mask.sum(1).tolist()
        self.width = max(lengths, default=0)
        room: list[int] = []  # space left in each packed row
        starts = [0] * len(lengths)  # where each text begins in the packed rows, flattened
        for text in sorted(range(len(lengths)), key=lambda t: -lengths[t]):
            row = next((r for r, free in enumerate(room) if free >= lengths[text]), len(room))
            if row == len(room):
                room.append(self.width)
            starts[text] = row * self.width + self.width - room[row]
            room[row] -= lengths[text]
        self.rows = len(room)
        device = attention_mask.device
        n = torch.tensor(lengths, dtype=torch.long, device=device)
        within = torch.arange(int(n.sum()), device=device) - torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
        # For each real token, text after text: its position in its text, its packed slot, its padded slot.
        self.within = within
        self.target = torch.repeat_interleave(torch.tensor(starts, dtype=torch.long, device=device), n) + within
        self.source = torch.nonzero(attention_mask.bool().flatten()).squeeze(1)
        self.segment = self.place(torch.repeat_interleave(torch.arange(len(lengths), device=device), n) + 1)

    @property
    def worth(self) -> bool:
        """Fewer rows than the padded batch: less to compute (else packing only costs its bookkeeping)."""
        return 0 < self.rows < self.shape[0]

    def place(self, tokens: torch.Tensor) -> torch.Tensor:
        """(tokens, ...) real tokens, text after text -> (rows, width, ...), zeros in the unused slots."""
        out = tokens.new_zeros(self.rows * self.width, *tokens.shape[1:]).index_copy(0, self.target, tokens)
        return out.view(self.rows, self.width, *tokens.shape[1:])

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """(rows, width, hidden) -> (batch, length, hidden), zeros at the padding, as a padded forward gives."""
        rows, length = self.shape
        tokens = packed.reshape(-1, packed.shape[-1]).index_select(0, self.target)
        out = tokens.new_zeros(rows * length, tokens.shape[-1]).index_copy(0, self.source, tokens)
        return out.view(rows, length, -1)

    def mask(self, hidden: torch.Tensor) -> torch.Tensor:
        """The layers' attention mask, additive (0 where a token may attend, the dtype's minimum elsewhere), the form
        both eager and sdpa attention take as given: a token sees only its own text's tokens, and the unused slots
        see each other, so no row is wholly masked. (Built here: transformers' create_bidirectional_mask with a mask
        function took 15 ms a batch.)"""
        same = self.segment[:, None, :, None] == self.segment[:, None, None, :]
        return hidden.new_zeros(same.shape).masked_fill_(~same, torch.finfo(hidden.dtype).min)


def packs(config) -> bool:
    """Whether a model with this config can run packed batches: a BERT-style architecture whose attention takes the
    additive mask Pack.mask builds."""
    return getattr(config, "model_type", None) in TOP_LAYER_TYPES and \
        getattr(config, "_attn_implementation", None) in MASKED_ATTENTION


def run_packed(layers: Sequence[torch.nn.Module], hidden: torch.Tensor, pack: Pack) -> BaseModelOutput:
    """The layers over a packed (rows, width, hidden) batch; the output in the padded batch's layout."""
    mask = pack.mask(hidden)
    for layer in layers:
        hidden = layer(hidden, mask)
    return BaseModelOutput(last_hidden_state=pack.unpack(hidden))


class StandIn(torch.nn.Module):
    """Takes a Hugging Face model's place in the sentence-transformers Transformer module, sharing its weights: it
    answers what the library asks of the model (its config, its attention implementation), embeds, and hands calls
    that need every layer's output (hidden states, attentions) to the model itself."""

    def __init__(self, hf: torch.nn.Module) -> None:
        super().__init__()
        self.hf = hf

    @property
    def config(self):
        return self.hf.config

    def set_attn_implementation(self, implementation: str) -> None:
        self.hf.set_attn_implementation(implementation)

    def whole(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None,
              **kwargs):
        """The model's own forward."""
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.hf(input_ids=input_ids, attention_mask=attention_mask, **extra, **kwargs)

    def embed(self, **inputs: torch.Tensor) -> torch.Tensor:
        """The embedding layer's output at the width of the model's layers."""
        hidden = self.hf.embeddings(**inputs)
        project = getattr(self.hf, "embeddings_project", None)  # ELECTRA: embeddings narrower than its layers
        return hidden if project is None else project(hidden)


class Packed(StandIn):
    """Stands in for a BERT-style Hugging Face model: a batch that packs into fewer rows runs packed (embeddings with
    each text's own positions, then every layer); any other, and any call asking for hidden states or attentions
    (the layer-wise curves, ATA pooling), runs the model itself."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool | None = None,
                output_attentions: bool | None = None, **kwargs):
        pack = None if output_hidden_states or output_attentions else Pack(attention_mask)
        if pack is None or not pack.worth:
            return self.whole(input_ids, attention_mask, token_type_ids, output_hidden_states=output_hidden_states,
                              output_attentions=output_attentions, **kwargs)
        real = attention_mask.bool()
        ids = pack.place(input_ids[real])
        types = torch.zeros_like(ids) if token_type_ids is None else pack.place(token_type_ids[real])
        first = self.config.pad_token_id + 1 if self.config.model_type in OFFSET_POSITIONS else 0
        hidden = self.embed(input_ids=ids, token_type_ids=types, position_ids=pack.place(pack.within + first))
        return run_packed(self.hf.encoder.layer, hidden, pack)


@contextmanager
def packed_training(model) -> Iterator[bool]:
    """Within the block, the training forwards (train mode, gradients on) of a BERT-style model on the CPU run
    through Packed; every other call sees the model itself, so an evaluation's encode still finds the plain Hugging
    Face model that the ONNX engine and the encode pool take. Yields whether it packs."""
    transformer = model[0]
    hf = getattr(transformer, "auto_model", None)
    config = getattr(hf, "config", None)
    if model.device.type != "cpu" or not packs(config) or \
            not isinstance(getattr(getattr(hf, "encoder", None), "layer", None), torch.nn.ModuleList):
        yield False  # another architecture, or the quick point's TopLayers, which packs its own batches
        return
    packed = Packed(hf)

    def swap_in(module, _args) -> None:
        if module.training and torch.is_grad_enabled():
            module.model = packed

    def swap_out(module, _args, _output) -> None:
        module.model = hf

    handles = [transformer.register_forward_pre_hook(swap_in),
               transformer.register_forward_hook(swap_out, always_call=True)]
    try:
        yield True
    finally:
        for handle in handles:
            handle.remove()
        transformer.model = hf
