"""ATA (anchor-token-aware) pooling (docs/definitions.md, ATA pooling).

An anchor token is one that many queries attend to, so its weight sums the attention it
RECEIVES in the last layer: w_t = sum_h sum_q log(P^h[q, t] * S + 1), normalised over tokens to
sum 1, and the sentence vector is v = sum_t w_t H_t.

Design. sentence-transformers' ``Transformer`` module passes only token embeddings (and hidden
states) on to later modules, and sdpa attention returns no probabilities. So ATA is two modules:

- ``ATATransformer``, a ``Transformer`` subclass that always loads the model with eager attention
  and writes the last layer's attention probabilities into ``features["attentions"]``;
- ``ATAPooling``, a pooling module that is a pure function of the features dict.

Why a subclass rather than a forward hook registered by the pooling module: a module is rebuilt
from its class path in ``modules.json``, so the subclass survives ``save``/load with no extra
state and no re-wiring; the attentions travel in the features dict, so concurrent forwards
(two Streamlit sessions sharing a cached model) cannot see each other's attentions, which
hooks writing to shared state could; and the pooling stays testable on plain tensors.

Loading. sentence-transformers 6 refuses to import a module class outside its own namespace
unless remote code is trusted (``trust_remote_code``), which would also let a model directory run any code. Use
``load_allowing_ata`` instead: it maps exactly our two class paths to the already-imported classes
(the mechanism the library's own trainer uses to reload checkpoints) and keeps the gate for
everything else. A plain ``SentenceTransformer(dir)`` on an ATA model fails loudly rather than
silently falling back to another pooling.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Module, Transformer
from sentence_transformers.sentence_transformer.modules import Pooling

from core.errors import UserError


def ata_weights(attentions: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """ATA token weights (batch, S) from last-layer attention (batch, heads, S, S), rows = queries.

    S_b is each sequence's unpadded length; padded queries and keys are excluded and padded tokens
    get weight 0. Computed in float32 so half-precision attention does not lose the small terms.
    """
    mask = attention_mask.to(device=attentions.device, dtype=torch.float32)
    lengths = mask.sum(dim=-1).clamp(min=1.0)
    scores = torch.log1p(attentions.float() * lengths[:, None, None, None])
    received = (scores * mask[:, None, :, None]).sum(dim=(1, 2)) * mask
    return received / received.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(torch.float32).tiny)


class ATATransformer(Transformer):
    """A ``Transformer`` that runs with eager attention and passes on the last layer's attention.

    In training mode the probabilities are those the model itself uses, i.e. after attention
    dropout; in eval mode they are the exact softmax. ``output_attentions`` keeps every layer's
    attention until the forward returns (they are kept for the backward pass anyway).
    """

    def __init__(self, model_name_or_path: str, *, model_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        model_kwargs = {**(model_kwargs or {}), "attn_implementation": "eager"}
        super().__init__(model_name_or_path, model_kwargs=model_kwargs, **kwargs)

    @classmethod
    def adopt(cls, transformer: Transformer) -> ATATransformer:
        """Turn a loaded ``Transformer`` into an ATA one in place (the caller passes its own copy).

        Swapping the class keeps the loaded weights and tokenizer without re-reading them from disk;
        the subclass adds no state, so the swapped object is a complete ``ATATransformer``.
        """
        transformer.__class__ = cls
        transformer.auto_model.set_attn_implementation("eager")
        return transformer

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Run the model once; write token embeddings, last-layer attentions and (if asked for) all layers.

        ``kwargs`` override model arguments as in ``Transformer.forward`` (e.g. ``output_hidden_states``), except
        that attentions are always returned: the pooling reads them.
        """
        accepted = inspect.signature(self.auto_model.forward).parameters
        inputs = {key: value for key, value in features.items() if key in accepted}
        output = self.auto_model(**{**inputs, **kwargs, "output_attentions": True, "return_dict": True})
        features["token_embeddings"] = output.last_hidden_state
        features["attentions"] = output.attentions[-1]
        if output.hidden_states is not None:
            features["all_layer_embeddings"] = output.hidden_states
        return features

    def __repr__(self) -> str:
        return f"ATA{super().__repr__()}"


class ATAPooling(Module):
    """Pooling v = sum_t w_t H_t with ATA weights; also leaves the weights in ``features["ata_weights"]``."""

    config_keys = ["embedding_dimension"]

    def __init__(self, embedding_dimension: int) -> None:
        super().__init__()
        self.embedding_dimension = embedding_dimension

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if "attentions" not in features:
            raise ValueError("ATAPooling needs attention from ATATransformer; build the model with build_ata_model().")
        hidden = features["token_embeddings"]
        weights = ata_weights(features["attentions"], features["attention_mask"])
        features["ata_weights"] = weights
        features["sentence_embedding"] = torch.einsum("bs,bsd->bd", weights, hidden.float()).to(hidden.dtype)
        return features

    def get_embedding_dimension(self) -> int:
        return self.embedding_dimension

    def save(self, output_path: str, *args: Any, **kwargs: Any) -> None:
        self.save_config(output_path)


# Class paths a saved modules.json may name: this module's, and "core.ata", where models saved before the
# package layout name them.
MODULE_CLASSES: dict[str, type[torch.nn.Module]] = {
    f"{module}.{cls.__qualname__}": cls for cls in (ATATransformer, ATAPooling) for module in (cls.__module__, "core.ata")
}


def build_ata_model(base: SentenceTransformer) -> SentenceTransformer:
    """A copy of ``base`` whose pooling is ATA; later modules (Dense, Normalize) are kept, ``base`` is untouched."""
    transformer = base[0]
    if not isinstance(transformer, Transformer):
        raise UserError("ATA pooling needs a transformer model; this model's first module is not a Transformer.")
    dimension = transformer.get_embedding_dimension()
    pooling_at = [i for i, module in enumerate(base) if isinstance(module, (Pooling, ATAPooling))]
    if not pooling_at:
        raise UserError("ATA pooling replaces the model's pooling layer, but this model has none.")
    if any(base[i].get_embedding_dimension() != dimension for i in pooling_at):
        raise UserError("ATA pooling can only replace a single-mode pooling (output size = hidden size).")

    model = copy.deepcopy(base)
    ATATransformer.adopt(model[0])
    for i in pooling_at:
        model[i] = ATAPooling(dimension)
    return model


def load_allowing_ata(path: str | Path, **kwargs: Any) -> SentenceTransformer:
    """Load a saved sentence-transformers directory, ATA or not, without ``trust_remote_code``.

    Only ``MODULE_CLASSES`` are resolved to our code; any other non-library class still needs the flag.
    """
    return SentenceTransformer._load_with_module_classes(str(path), MODULE_CLASSES, **kwargs)
