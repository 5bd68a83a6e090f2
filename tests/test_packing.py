"""Padding-free training steps (core.training.packing): a packed batch gives each text the hidden states and the
gradients its padded row gives, for every architecture it packs; only training forwards pack, evaluation batches
and other architectures run the model itself, and the model is restored whatever happens."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel, ElectraConfig, ElectraModel, RobertaConfig, RobertaModel

from core.training.packing import Pack, Packed, packed_training, packs
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


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("types", [False, True], ids=["no-types", "types"])
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_a_packed_batch_gives_each_text_its_padded_rows_states_and_gradients(name, types, attention):
    torch.manual_seed(0)
    hf = ARCHITECTURES[name]()
    hf.set_attn_implementation(attention)
    assert packs(hf.config)
    batch = _batch(hf.config.pad_token_id, types)
    real = batch["attention_mask"].bool()
    assert Pack(batch["attention_mask"]).rows == 3  # 9 | 7 2 | 5 1: fewer rows than texts

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


def test_texts_go_longest_first_into_the_first_row_with_room():
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]])
    pack = Pack(mask)
    # longest first: text 1 (4) -> row 0; text 3 (3) -> row 1; text 0 (2) -> row 2; text 2 (1) -> row 1's last slot
    assert pack.segment.tolist() == [[2, 2, 2, 2], [4, 4, 4, 3], [1, 1, 0, 0]]
    assert pack.place(pack.within).tolist() == [[0, 1, 2, 3], [0, 1, 2, 0], [0, 1, 0, 0]]
    padded = torch.arange(16.0).view(4, 4, 1) * mask.unsqueeze(-1)
    packed = pack.place(padded[mask.bool()])
    assert torch.equal(pack.unpack(packed), padded)  # every real token back in its slot, zeros at the padding


def test_a_batch_packs_only_when_it_saves_rows():
    assert not Pack(torch.ones(3, 5, dtype=torch.long)).worth  # equal lengths: a sorted evaluation batch
    assert not Pack(torch.tensor([[1, 1, 1], [1, 1, 0]])).worth  # 3 + 2 do not share a row of 3
    assert Pack(torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]])).worth  # 2 + 2 share one
    assert not Pack(torch.zeros(0, 0, dtype=torch.long)).worth


def test_only_attention_that_adds_a_given_mask_packs():
    config = BertConfig(**SMALL)
    for implementation, expected in (("sdpa", True), ("eager", True), ("flash_attention_2", False),
                                     ("flex_attention", False)):
        config._attn_implementation = implementation
        assert packs(config) is expected
    config._attn_implementation = "sdpa"
    config.model_type = "mpnet"
    assert not packs(config)


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
        assert Pack(features["attention_mask"]).worth
        fast = model(dict(features))["sentence_embedding"]
    torch.testing.assert_close(fast.detach(), full, atol=1e-5, rtol=1e-4)
