"""Padding-free training steps: a batch's texts run through the transformer as one sequence of their real tokens,
each token attending only to its own text's (a block-diagonal mask), so the layers compute no padding.

Why: the trainer draws its batches at random, so every text is padded to the batch's longest. 16 SST-2 texts
computed 2.66x their real tokens, 32 texts 3.03x. Packed, all-MiniLM-L6-v2's forward and backward over 12 random
batches of 32 took 5.6-6.0 s against 9.1 s padded (2 cores), the outputs within 1e-6 of each other. Each text's
positions restart at its first token, so the sum over a text is the same as in its own padded row.

Evaluation batches are already sorted by token count (core.models.encode.longest_first) and pad about 1%, and a
packed batch's attention is one (tokens x tokens) matrix per head: `worth_packing` compares the layers'
multiply-adds both ways, per batch, so those batches stay padded.

`packed_training(model)` has a BERT-style model's training forwards run through `Packed`, which shares the model's
weights; the quick point's TopLayers (core.training.top_layers) packs its own batches the same way, through `Pack`.
On a GPU the padded batch's extra tokens run in parallel and nothing here has been measured, so only CPU models
are packed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from transformers.modeling_outputs import BaseModelOutput

from core.models.loading import TOP_LAYER_TYPES

PACK_MAX = 1024  # real tokens a packed batch may hold: its attention keeps heads x PACK_MAX^2 floats per layer
# Whose positions count from pad_token_id + 1 (fairseq's layout) instead of 0.
OFFSET_POSITIONS = ("roberta", "xlm-roberta")


def worth_packing(lengths: Sequence[int], hidden: int) -> bool:
    """Whether one packed sequence costs fewer multiply-adds than the padded batch: per layer, per 4 x hidden, the
    projections and feed-forward take 6 x hidden per token and attention one per (query, key) pair."""
    real, width, rows = sum(lengths), max(lengths, default=0), len(lengths)
    if not 0 < real <= PACK_MAX:
        return False
    return 6 * hidden * real + real * real < 6 * hidden * rows * width + rows * width * width


class Pack:
    """The layout of one packed batch: which padded positions hold a real token, in row order."""

    def __init__(self, attention_mask: torch.Tensor) -> None:
        self.real = attention_mask.bool()
        self.shape = tuple(attention_mask.shape)
        self.lengths = self.real.sum(1)
        rows = torch.arange(len(self.lengths), device=attention_mask.device)
        self.segment = torch.repeat_interleave(rows, self.lengths)  # the row of each packed token
        self.index = torch.nonzero(self.real.flatten()).squeeze(1)  # each packed token's padded position

    def flat(self, padded: torch.Tensor) -> torch.Tensor:
        """(rows, width, ...) -> (1, tokens, ...): the real tokens of a padded batch, row after row."""
        return padded[self.real].unsqueeze(0)

    def padded(self, flat: torch.Tensor) -> torch.Tensor:
        """(1, tokens, hidden) -> (rows, width, hidden) with zeros at the padding, as a padded forward's layout."""
        rows, width = self.shape
        out = flat.new_zeros(rows * width, flat.shape[-1]).index_copy(0, self.index, flat[0])
        return out.view(rows, width, -1)

    def positions(self, first: int) -> torch.Tensor:
        """(1, tokens): each token's position within its own text, counted from `first`."""
        starts = torch.cumsum(self.lengths, 0) - self.lengths
        within = torch.arange(len(self.segment), device=self.segment.device) - starts[self.segment]
        return (within + first).unsqueeze(0)

    def mask(self, config, hidden: torch.Tensor):
        """The layers' attention mask, in the form the model's attention implementation takes: a token sees only
        the tokens of its own text."""
        from transformers.masking_utils import create_bidirectional_mask

        segment = self.segment
        return create_bidirectional_mask(config=config, inputs_embeds=hidden,
                                         attention_mask=torch.ones(hidden.shape[:2], dtype=torch.long,
                                                                   device=hidden.device),
                                         and_mask_function=lambda _b, _h, q, kv: segment[q] == segment[kv])


def run_packed(layers: Sequence[torch.nn.Module], config, hidden: torch.Tensor, pack: Pack) -> BaseModelOutput:
    """The layers over a packed (1, tokens, hidden) sequence; the output in the padded batch's layout."""
    mask = pack.mask(config, hidden)
    for layer in layers:
        hidden = layer(hidden, mask)
    return BaseModelOutput(last_hidden_state=pack.padded(hidden))


class Packed(torch.nn.Module):
    """Stands in for a BERT-style Hugging Face model: a batch `worth_packing` runs packed (embeddings with each
    text's own positions, then every layer), any other call, and any asking for hidden states or attentions (the
    layer-wise curves, ATA pooling), runs the model itself."""

    def __init__(self, hf: torch.nn.Module) -> None:
        super().__init__()
        self.hf = hf

    @property
    def config(self):
        return self.hf.config

    def set_attn_implementation(self, implementation: str) -> None:
        self.hf.set_attn_implementation(implementation)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool | None = None,
                output_attentions: bool | None = None, **kwargs):
        lengths = attention_mask.sum(1).tolist()
        if output_hidden_states or output_attentions or not worth_packing(lengths, self.config.hidden_size):
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            return self.hf(input_ids=input_ids, attention_mask=attention_mask,
                           output_hidden_states=output_hidden_states, output_attentions=output_attentions, **extra,
                           **kwargs)
        pack = Pack(attention_mask)
        ids = pack.flat(input_ids)
        types = torch.zeros_like(ids) if token_type_ids is None else pack.flat(token_type_ids)
        first = self.config.pad_token_id + 1 if self.config.model_type in OFFSET_POSITIONS else 0
        hidden = self.hf.embeddings(input_ids=ids, token_type_ids=types, position_ids=pack.positions(first))
        project = getattr(self.hf, "embeddings_project", None)  # ELECTRA: embeddings narrower than its layers
        if project is not None:
            hidden = project(hidden)
        return run_packed(self.hf.encoder.layer, self.config, hidden, pack)


@contextmanager
def packed_training(model) -> Iterator[bool]:
    """Within the block, the training forwards (train mode, gradients on) of a BERT-style model on the CPU run
    through Packed; every other call sees the model itself, so an evaluation's encode still finds the plain Hugging
    Face model that the ONNX engine and the encode pool take. Yields whether it packs."""
    transformer = model[0]
    hf = getattr(transformer, "auto_model", None)
    config = getattr(hf, "config", None)
    if model.device.type != "cpu" or getattr(config, "model_type", None) not in TOP_LAYER_TYPES or \
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
