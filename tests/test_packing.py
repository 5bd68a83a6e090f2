"""Padding-free training steps (core.training.packing): a packed batch gives each text the hidden states and the
gradients its padded row gives, for every architecture it packs; only training forwards pack, evaluation batches
and other architectures run the model itself, and the model is restored whatever happens."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel, ElectraConfig, ElectraModel, RobertaConfig, RobertaModel

from core.training.packing import PACK_MAX, Pack, Packed, packed_training, worth_packing
from core.training.top_layers import top_layers_view
from tests.tiny_model import build_tiny_model

SMALL = {"vocab_size": 60, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 32, "max_position_embeddings": 64, "hidden_dropout_prob": 0.0,
         "attention_probs_dropout_prob": 0.0}
ARCHITECTURES = {
    "bert": lambda: BertModel(BertConfig(**SMALL), add_pooling_layer=False),
    "roberta": lambda: RobertaModel(RobertaConfig(**SMALL, pad_token_id=1), add_pooling_layer=False),
    "electra": lambda: ElectraModel(ElectraConfig(**SMALL, embedding_size=8)),  # embeddings narrower: projected
}
LENGTHS = [9, 2, 5, 1, 7]


def _batch(pad: int, types: bool) -> dict[str, torch.Tensor]:
    """Token ids padded on the right to the longest of LENGTHS; token types 1 on a text's second half if `types`."""
    torch.manual_seed(0)
    width = max(LENGTHS)
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in LENGTHS])
    ids = torch.where(mask.bool(), torch.randint(5, 60, mask.shape), pad)
    batch = {"input_ids": ids, "attention_mask": mask}
    if types:
        batch["token_type_ids"] = torch.tensor([[int(i >= n // 2) * (i < n) for i in range(width)] for n in LENGTHS])
    return batch


@pytest.mark.parametrize("types", [False, True], ids=["no-types", "types"])
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_a_packed_batch_gives_each_text_its_padded_rows_states_and_gradients(name, types):
    torch.manual_seed(0)
    hf = ARCHITECTURES[name]()
    batch = _batch(hf.config.pad_token_id, types)
    real = batch["attention_mask"].bool()
    assert worth_packing(LENGTHS, hf.config.hidden_size)

    def run(module):
        hf.zero_grad()
        out = module(**batch).last_hidden_state
        (out[real] * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
        return out.detach(), [p.grad.clone() for p in hf.parameters() if p.grad is not None]

    padded, padded_grads = run(hf)
    packed, packed_grads = run(Packed(hf))
    torch.testing.assert_close(packed[real], padded[real], atol=1e-5, rtol=1e-4)
    assert float(packed[~real].abs().max()) == 0.0  # padding rows are zeros, as the pooling's mask expects
    assert len(packed_grads) == len(padded_grads)
    for a, b in zip(packed_grads, padded_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_pack_positions_restart_at_each_text():
    pack = Pack(torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]]))
    assert pack.positions(0).tolist() == [[0, 1, 2, 0, 0, 1]]
    assert pack.positions(2).tolist() == [[2, 3, 4, 2, 2, 3]]
    assert pack.segment.tolist() == [0, 0, 0, 1, 2, 2]


def test_worth_packing_only_where_it_computes_less():
    assert worth_packing([30, 3, 4, 5, 2, 6, 3, 4], 384)  # a random training batch: mostly padding
    assert not worth_packing([14] * 64, 384)  # a sorted evaluation batch: no padding, and attention grows
    assert worth_packing([PACK_MAX - 3, 1, 1, 1], 384) and not worth_packing([PACK_MAX - 2, 1, 1, 1], 384)
    # ^ one token more than a pack holds
    assert not worth_packing([], 384) and not worth_packing([0, 0], 384)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from core.models.loading import load_model

    return load_model(str(build_tiny_model(tmp_path_factory.mktemp("packing") / "model", layers=3)), device="cpu")


def _features(model, texts):
    return dict(model.preprocess(texts))


TEXTS = ["a", "the film was long, slow and far too loud for its own good in every part", "b", "c d", "e"]


def test_only_training_forwards_pack_and_the_model_is_restored(model):
    transformer, hf = model[0], model[0].auto_model
    seen = []
    hook = transformer.register_forward_hook(lambda module, _a, _o: seen.append(type(module.model).__name__))
    try:
        with packed_training(model) as packs:
            assert packs and transformer.model is hf  # plain between forwards: the engine and the pool see it
            model.train()
            model(_features(model, TEXTS))
            with torch.no_grad():
                model(_features(model, TEXTS))
            model.eval()
            model(_features(model, TEXTS))
            model.train()
            def fail(*_) -> None:
                raise RuntimeError("boom")

            handle = hf.encoder.layer[0].register_forward_hook(fail)
            try:
                with pytest.raises(RuntimeError, match="boom"):
                    model(_features(model, TEXTS))
            finally:
                handle.remove()
            assert transformer.model is hf  # a forward that raised left the model plain too
    finally:
        hook.remove()
        model.eval()
    assert seen[:3] == ["Packed", "BertModel", "BertModel"]
    assert transformer.model is hf


def test_training_embeddings_equal_the_padded_models(model):
    model.eval()  # no dropout, but gradients on: the packed path runs
    features = _features(model, TEXTS)
    plain = model(dict(features))["sentence_embedding"]
    with packed_training(model):
        transformer = model[0]
        transformer.training = True  # the module alone in training mode: its forward packs, dropout stays off
        try:
            packed = model(dict(features))["sentence_embedding"]
        finally:
            transformer.training = False
    torch.testing.assert_close(packed, plain, atol=1e-5, rtol=1e-4)


def test_other_architectures_and_top_layer_views_are_left_alone(model):
    with top_layers_view(model, 1, TEXTS):
        with packed_training(model) as packs:
            assert not packs  # TopLayers packs its own batches
    hf = model[0].auto_model
    model_type = hf.config.model_type
    hf.config.model_type = "mpnet"
    try:
        with packed_training(model) as packs:
            assert not packs
    finally:
        hf.config.model_type = model_type


def test_top_layers_training_batch_packs_and_matches_the_full_model(model):
    features = _features(model, TEXTS)
    model.eval()
    with torch.no_grad():
        full = model(dict(features))["sentence_embedding"]
    with top_layers_view(model, 1, TEXTS) as view:
        lengths = features["attention_mask"].sum(1).tolist()
        assert worth_packing(lengths, view.config.hidden_size)
        fast = model(dict(features))["sentence_embedding"]
    torch.testing.assert_close(fast.detach(), full, atol=1e-5, rtol=1e-4)
