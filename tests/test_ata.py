"""ATA pooling (docs/definitions.md, ATA pooling): the weight formula, the pooling, and an ATA model end to end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.base.modules import Transformer
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

from core.data.crops import CropPairs, to_dataset
from core.models.ata import ATAPooling, ata_weights, build_ata_model
from core.training.card import contrastlab_card_section
from core.training.config import TrainConfig
from tests.tiny_model import SECOND_PASS_ATOL, build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["the film was good", "a long story about a man and his dog who lived near the sea", "why"]


def reference_weights(attentions: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The formula written as loops: w_t = sum_h sum_q log(P[h, q, t] * S + 1) over unpadded q, t."""
    batch, heads, size, _ = attentions.shape
    out = np.zeros((batch, size))
    for b in range(batch):
        valid = [i for i in range(size) if mask[b, i]]
        for t in valid:
            out[b, t] = sum(np.log(attentions[b, h, q, t] * len(valid) + 1) for h in range(heads) for q in valid)
        out[b] /= out[b].sum()
    return out


def random_attention(mask: np.ndarray, heads: int = 3, seed: int = 0) -> np.ndarray:
    """Row-stochastic attention over unpadded keys, with junk in padded rows to prove they are ignored."""
    rng = np.random.default_rng(seed)
    batch, size = mask.shape
    probs = rng.random((batch, heads, size, size)) * mask[:, None, None, :] * 5
    probs = np.exp(probs) * mask[:, None, None, :]
    probs /= probs.sum(-1, keepdims=True)
    pad_rows = mask[:, None, :, None] == 0
    return np.where(pad_rows, rng.random(probs.shape), probs)


MASK = np.array([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 1]])


def test_weights_match_the_formula_with_padding():
    attentions = random_attention(MASK)
    got = ata_weights(torch.tensor(attentions, dtype=torch.float32), torch.tensor(MASK)).numpy()
    np.testing.assert_allclose(got, reference_weights(attentions, MASK), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got.sum(1), 1.0, rtol=1e-6)
    assert (got[MASK == 0] == 0).all() and (got[MASK == 1] > 0).all()
    assert got[2, 0] == pytest.approx(1.0)  # a one-token sequence puts all weight on it


def test_weights_ignore_probability_mass_on_padded_keys():
    attentions = random_attention(MASK, seed=1)
    leaky = attentions.copy()
    leaky[1, :, :, 4:] = 0.3  # junk attention to padded keys
    a = ata_weights(torch.tensor(attentions), torch.tensor(MASK))
    b = ata_weights(torch.tensor(leaky), torch.tensor(MASK))
    torch.testing.assert_close(a, b)


def test_a_token_receiving_more_attention_gets_more_weight():
    size = 6
    uniform = np.full((1, 2, size, size), 1 / size)
    anchored = uniform.copy()
    anchored[..., :] = 0.5 / (size - 1)
    anchored[..., 2] = 0.5  # every query sends half its attention to token 2
    mask = torch.ones(1, size)
    flat = ata_weights(torch.tensor(uniform), mask)[0]
    peaked = ata_weights(torch.tensor(anchored), mask)[0]
    torch.testing.assert_close(flat, torch.full((size,), 1 / size, dtype=torch.float32))
    assert int(peaked.argmax()) == 2 and peaked[2] > 2 * peaked[0]


def test_pooling_is_the_weighted_sum_of_hidden_states():
    hidden = torch.randn(len(MASK), MASK.shape[1], 8, generator=torch.Generator().manual_seed(0))
    attentions = torch.tensor(random_attention(MASK, heads=2), dtype=torch.float32)
    features = {"token_embeddings": hidden, "attentions": attentions, "attention_mask": torch.tensor(MASK)}
    out = ATAPooling(8)(features)
    weights = reference_weights(attentions.numpy(), MASK)
    expected = np.einsum("bs,bsd->bd", weights, hidden.numpy())
    np.testing.assert_allclose(out["sentence_embedding"].numpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="ATATransformer"):
        ATAPooling(8)({"token_embeddings": hidden, "attention_mask": torch.tensor(MASK)})


@pytest.fixture(scope="module")
def base(tiny_model_dir) -> SentenceTransformer:
    return SentenceTransformer(str(tiny_model_dir), device="cpu")


@pytest.fixture(scope="module")
def ata(base) -> SentenceTransformer:
    return build_ata_model(base)


def test_tiny_model_is_deterministic_and_tokenizes_english(tmp_path, base):
    again = SentenceTransformer(str(build_tiny_model(tmp_path / "again")), device="cpu")
    np.testing.assert_allclose(again.encode(TEXTS), base.encode(TEXTS), rtol=0, atol=SECOND_PASS_ATOL)
    assert "[UNK]" not in base.tokenizer.tokenize("Quarterly profits jumped 76% to $1.13bn.")


def test_build_replaces_pooling_and_leaves_base_untouched(base, ata):
    before = base.encode(TEXTS)
    assert [type(m).__name__ for m in ata] == ["ATATransformer", "ATAPooling", "Normalize"]
    assert type(base[0]) is Transformer and type(base[1]).__name__ == "Pooling"
    assert base[0].auto_model.config._attn_implementation == "sdpa"
    assert ata[0].auto_model.config._attn_implementation == "eager"
    assert ata.get_embedding_dimension() == base.get_embedding_dimension()
    np.testing.assert_allclose(base.encode(TEXTS), before, rtol=0, atol=SECOND_PASS_ATOL)


def test_encode_equals_the_formula_on_the_raw_model(ata):
    """Independent path: run the HF model eagerly, pool with the loop formula, L2-normalise."""
    encoded = ata.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = ata[0].auto_model(**encoded, output_attentions=True)
    mask = encoded["attention_mask"].numpy()
    weights = reference_weights(out.attentions[-1].numpy(), mask)
    vectors = np.einsum("bs,bsd->bd", weights, out.last_hidden_state.numpy())
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(ata.encode(TEXTS), vectors, rtol=1e-4, atol=1e-5)


def _forward(model: SentenceTransformer, texts: list[str]) -> dict:
    """The features dict after every module, as in training (encode() keeps only the sentence embedding)."""
    features = model.preprocess(texts)
    return model(features)


def test_weights_of_a_real_forward_are_a_distribution_over_unpadded_tokens(ata):
    with torch.no_grad():
        features = _forward(ata, TEXTS)
    weights, mask = features["ata_weights"], features["attention_mask"].bool()
    assert weights.shape == mask.shape and not mask.all()  # the batch is padded
    assert (weights >= 0).all() and (weights[~mask] == 0).all() and (weights[mask] > 0).all()
    torch.testing.assert_close(weights.sum(1), torch.ones(len(TEXTS)))


def test_an_embedding_is_the_same_alone_and_inside_a_padded_batch(ata):
    short, long = "why", TEXTS[1] + " " + TEXTS[1]
    alone = ata.encode([short])[0]
    batched = ata.encode([short, long], batch_size=2)[0]
    np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-5)
    with torch.no_grad():
        weights = _forward(ata, [short, long])["ata_weights"]
        solo = _forward(ata, [short])["ata_weights"]
    assert weights.shape[1] > solo.shape[1]  # the short text really was padded
    torch.testing.assert_close(weights[0, : solo.shape[1]], solo[0], rtol=0, atol=1e-6)


def test_gradients_reach_the_transformer_through_the_weights(base):
    """With the hidden states detached, the pooled vector depends on the transformer only through the ATA weights
    (the last layer's attention probabilities), so its query and key projections get a gradient only that way."""
    model = build_ata_model(base)
    features = model[0](model.preprocess(TEXTS))
    hidden = features["token_embeddings"]
    features["token_embeddings"] = hidden.detach()
    pooled = model[1](features)["sentence_embedding"]
    direction = torch.randn(pooled.shape, generator=torch.Generator().manual_seed(0))
    (pooled * direction).sum().backward()
    attention = model[0].auto_model.encoder.layer[-1].attention.self
    for projection in (attention.query, attention.key):
        assert projection.weight.grad is not None and projection.weight.grad.abs().sum() > 0
    # the value projection only shapes the (detached) hidden states, so it gets none
    assert attention.value.weight.grad is None or attention.value.weight.grad.abs().sum() == 0


def test_the_card_says_how_to_load_an_ata_model_and_only_for_ata_runs():
    def load_line(pooling: str) -> str:
        card = contrastlab_card_section(TrainConfig(corpus="x.csv", pooling=pooling), {})
        return next(line for line in card.splitlines() if line.startswith("Load with"))

    ata_line = load_line("ata")
    assert "load_allowing_ata(path)" in ata_line and "no `trust_remote_code` needed" in ata_line
    for pooling in ("model", "mean", "cls"):
        line = load_line(pooling)
        assert line.startswith("Load with `SentenceTransformer(path)`.") and "load_allowing_ata" not in line


# Read a model path on stdin, so the slow library import overlaps the training in the test. The first loads with our
# loader and, as the card says, with trust_remote_code while ContrastLab's `core` is importable; the second tries
# trust_remote_code from a folder where `core` is not importable.
RELOAD_SCRIPT = (
    "import json; from sentence_transformers import SentenceTransformer; "
    "from core.models.ata import load_allowing_ata; path = input(); m = load_allowing_ata(path, device='cpu'); "
    "t = SentenceTransformer(path, device='cpu', trust_remote_code=True); "
    f"print(json.dumps([type(x).__name__ for x in m])); print(json.dumps(m.encode({TEXTS!r}).tolist())); "
    f"print(json.dumps(t.encode({TEXTS!r}).tolist()))"
)
BARE_SCRIPT = (
    "from sentence_transformers import SentenceTransformer; path = input()\n"
    "try:\n    SentenceTransformer(path, device='cpu', trust_remote_code=True)\n"
    "except Exception as exc:\n    print(type(exc).__name__, exc)"
)


def test_ata_model_trains_saves_and_reloads_in_a_fresh_process(tmp_path, ata):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    bare_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    pipes = {"text": True, "stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with (
        subprocess.Popen([sys.executable, "-c", RELOAD_SCRIPT], cwd=ROOT, env=env, **pipes) as fresh,
        subprocess.Popen([sys.executable, "-c", BARE_SCRIPT], cwd=tmp_path, env=bare_env, **pipes) as bare,
    ):  # on any failure below, closing stdin ends the children
        _train_save_and_compare(tmp_path, build_ata_model(ata), fresh, bare)


def _train_save_and_compare(tmp_path: Path, model: SentenceTransformer, fresh: subprocess.Popen,
                            bare: subprocess.Popen) -> None:
    """Train a private copy (the module-scoped fixture stays as built), save, compare with the fresh load."""
    words = "the film was good a long story about a man and his dog who lived near the sea".split()
    anchors = [" ".join(words[i : i + 5]) for i in range(8)]
    positives = [" ".join(words[i + 2 : i + 7]) for i in range(8)]
    dataset = to_dataset(CropPairs(anchors, positives, list(range(8)), skipped_docs=0, n_docs=8))
    before = {k: v.clone() for k, v in model[0].auto_model.state_dict().items()}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=4,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    loss = MultipleNegativesRankingLoss(model, scale=20.0)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss)
    trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert len(losses) == 4 and all(np.isfinite(losses))
    after = model[0].auto_model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "training did not change the transformer"

    saved = tmp_path / "ata-model"
    model.save(str(saved))
    expected = model.encode(TEXTS)
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(saved), device="cpu")  # never silently loaded with another pooling
    stdout, stderr = fresh.communicate(f"{saved}\n", timeout=180)
    assert fresh.returncode == 0, stderr[-2000:]
    names, vectors, trusted = stdout.strip().splitlines()[-3:]
    assert json.loads(names) == ["ATATransformer", "ATAPooling", "Normalize"]
    np.testing.assert_allclose(np.array(json.loads(vectors)), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(json.loads(trusted)), expected, rtol=1e-5, atol=1e-6)
    stdout, stderr = bare.communicate(f"{saved}\n", timeout=180)
    assert bare.returncode == 0, stderr[-2000:]
    assert "No module named 'core'" in stdout, stdout  # trust_remote_code alone cannot load it


def test_the_card_names_the_ata_loader_for_a_model_that_already_pools_with_ata():
    card = contrastlab_card_section(TrainConfig(corpus="x.csv", pooling="model"), {}, ata=True)
    assert "load_allowing_ata(path)" in card
