"""RAOELoss: its rank term is CoSENT, its angular term fires only where score and label agree, and it trains."""

from __future__ import annotations

import math

import pytest
import torch
from sentence_transformers.sentence_transformer.losses import CoSENTLoss

from core.errors import UserError
from core.losses.raoe import RAOELoss, batch_ranks, gate_pair_mask, gated_share, rank_pair_mask
from core.models.loading import load_model
from core.training.config import TrainConfig
from core.training.recipes import get_recipe

TEXTS1 = ["the dog ran home", "a man read a book", "the sun is high", "she sang a song", "the car is red",
          "we eat fish", "the king went to war", "children play in the tree"]
TEXTS2 = ["a dog went home", "the boy read the paper", "rain fell all night", "he sang a song", "the house is red",
          "they eat food", "the minister won the election", "the bird is in the tree"]


def _labels(scores: list[float], ordinal: list[float], dtype=torch.float32) -> torch.Tensor:
    """Column 0 the score (higher = more related), column 1 the ordinal label (0 = most related)."""
    return torch.tensor([scores, ordinal], dtype=dtype).T


def _pairs_at_angles(angles: list[float]) -> list[torch.Tensor]:
    """Two columns of 2-d embeddings whose pair i is ``angles[i]`` radians apart, so c_i = cos(angles[i])."""
    a = torch.tensor(angles, dtype=torch.float64)
    first = torch.stack((torch.ones_like(a), torch.zeros_like(a)), dim=1)
    return [first, torch.stack((torch.cos(a), torch.sin(a)), dim=1)]


@pytest.fixture
def fresh_model(tiny_model_dir):
    """A private copy to train or switch to eval mode without touching the session's model."""
    return load_model(str(tiny_model_dir), device="cpu")


def test_rank_term_with_interval_zero_is_cosent_on_embeddings(tiny_model) -> None:
    torch.manual_seed(1)
    embeddings = [torch.randn(16, 8), torch.randn(16, 8)]
    scores = torch.rand(16)
    assert len(set(scores.tolist())) == 16
    ordinal = torch.randint(0, 3, (16,)).float()
    raoe = RAOELoss(tiny_model, tau=20.0, interval=0, w_angle=0.0)
    expected = CoSENTLoss(tiny_model, scale=20.0).compute_loss_from_embeddings(embeddings, scores)
    got = raoe.compute_loss_from_embeddings(embeddings, torch.stack((scores, ordinal), dim=1))
    assert expected.item() > 1.0
    assert got.item() == pytest.approx(expected.item(), abs=1e-5)


@pytest.mark.parametrize("interval", [0, 0.125], ids=["I=0", "I_eff=0.125"])
def test_rank_term_below_one_rank_is_cosent_with_tied_scores(tiny_model, interval: float) -> None:
    torch.manual_seed(3)
    embeddings = [torch.randn(32, 8), torch.randn(32, 8)]
    scores = torch.randint(0, 6, (32,)).float()  # STS-B-like: whole gold scores 0..5, many tied
    assert len(set(scores.tolist())) < 32
    ordinal = torch.randint(0, 3, (32,)).float()
    raoe = RAOELoss(tiny_model, tau=20.0, interval=interval, w_angle=0.0)
    expected = CoSENTLoss(tiny_model, scale=20.0).compute_loss_from_embeddings(embeddings, scores)
    got = raoe.compute_loss_from_embeddings(embeddings, torch.stack((scores, ordinal), dim=1))
    assert expected.item() > 1.0
    assert got.item() == pytest.approx(expected.item(), abs=1e-5)


def test_rank_term_with_interval_zero_is_cosent_on_a_model_batch_with_tied_scores(fresh_model) -> None:
    fresh_model.eval()  # no dropout: the two losses must see the same embeddings
    features = [fresh_model.tokenize(TEXTS1), fresh_model.tokenize(TEXTS2)]
    scores = torch.tensor([5.0, 3.8, 3.8, 0.0, 2.4, 3.8, 0.0, 1.6])  # gold STS scores, some of them tied
    ordinal = torch.tensor([0, 0, 2, 0, 1, 1, 2, 2], dtype=torch.float32)
    got = RAOELoss(fresh_model, interval=0, w_angle=0.0)(features, torch.stack((scores, ordinal), dim=1))
    expected = CoSENTLoss(fresh_model, scale=20.0)(features, scores)
    assert got.item() == pytest.approx(expected.item(), abs=1e-5)


def test_angle_term_sums_only_the_gated_pair(tiny_model) -> None:
    angles = [0.3, 1.1, 0.7]
    # Only (i, j) = (0, 1) has l_i > l_j and s_i < s_j; (2, 0) and (2, 1) are label-ordered but 2 has the top score.
    labels = _labels([0.1, 0.5, 0.9], [1, 0, 2], dtype=torch.float64)
    loss = RAOELoss(tiny_model, tau=20.0, w_rank=0.0)
    got = loss.compute_loss_from_embeddings(_pairs_at_angles(angles), labels)
    assert got.item() == pytest.approx(math.log1p(math.exp(20.0 * (angles[1] - angles[0]))), rel=1e-9)
    assert loss.last_gated_share == pytest.approx(1 / 3)


# l_i > l_j: (0, 1), (2, 0), (2, 1); s_i < s_j: (0, 1), (0, 2), (1, 2); both: (0, 1) alone.
GATE_SCORES, GATE_ORDINAL = [0.1, 0.5, 0.9], [1, 0, 2]
GATED = {"both": {(0, 1)}, "label": {(0, 1), (2, 0), (2, 1)}, "score": {(0, 1), (0, 2), (1, 2)}}


@pytest.mark.parametrize("gate", sorted(GATED))
def test_each_gate_selects_exactly_its_pairs(gate: str) -> None:
    labels = _labels(GATE_SCORES, GATE_ORDINAL)
    mask = gate_pair_mask(labels[:, 0], labels[:, 1], gate)
    assert {(i, j) for i, j in mask.nonzero().tolist()} == GATED[gate]


@pytest.mark.parametrize("gate", sorted(GATED))
def test_the_angle_term_sums_over_the_gated_pairs(tiny_model, gate: str) -> None:
    angles = [0.3, 1.1, 0.5]  # every gate gives a different sum
    loss = RAOELoss(tiny_model, tau=5.0, w_rank=0.0, gate=gate)
    got = loss.compute_loss_from_embeddings(_pairs_at_angles(angles),
                                            _labels(GATE_SCORES, GATE_ORDINAL, dtype=torch.float64))
    expected = math.log1p(sum(math.exp(5.0 * (angles[j] - angles[i])) for i, j in GATED[gate]))
    assert got.item() == pytest.approx(expected, rel=1e-9)
    assert loss.last_gated_share == pytest.approx(1 / 3)  # measured on the data, whatever the gate


def test_the_raoe_recipe_passes_its_gate_and_the_ablations_keep_both(tiny_model) -> None:
    cfg = TrainConfig(corpus="pairs.csv", recipe="raoe", gate="label")
    assert get_recipe("raoe").build_loss(tiny_model, cfg).gate == "label"
    assert TrainConfig(corpus="pairs.csv", recipe="raoe").gate == "both"
    for ablation in ("raoe_rank", "raoe_angle"):
        cfg = TrainConfig(corpus="pairs.csv", recipe=ablation)
        assert get_recipe(ablation).build_loss(tiny_model, cfg).gate == "both"
    with pytest.raises(UserError, match="gate"):
        TrainConfig(corpus="pairs.csv", recipe="raoe", gate="labels")


def test_flipping_the_label_direction_flips_the_gated_share(tiny_model) -> None:
    scores = [0.95, 0.55, 0.6, 0.65, 0.3, 0.1]
    ordinal = [0, 0, 1, 1, 2, 2]  # most related first, as the scores say, except pair 1 scores below pairs 2, 3
    loss = RAOELoss(tiny_model)
    embeddings = _pairs_at_angles([0.2, 0.4, 0.6, 0.8, 1.0, 1.2])
    loss.compute_loss_from_embeddings(embeddings, _labels(scores, ordinal))
    right = loss.last_gated_share
    loss.compute_loss_from_embeddings(embeddings, _labels(scores, [2 - x for x in ordinal]))
    flipped = loss.last_gated_share
    assert right == pytest.approx(10 / 12) and flipped == pytest.approx(2 / 12)


def test_gated_share_is_nan_without_label_ordered_pairs(tiny_model) -> None:
    loss = RAOELoss(tiny_model)
    loss.compute_loss_from_embeddings(_pairs_at_angles([0.2, 0.4, 0.6]), _labels([0.1, 0.5, 0.9], [1, 1, 1]))
    assert math.isnan(loss.last_gated_share)
    assert gated_share(torch.tensor([0.1, 0.9]), torch.tensor([1.0, 0.0])) == 1.0


def test_rank_pairs_need_a_higher_score_and_more_than_the_interval() -> None:
    scores = torch.tensor([0.5, 0.2, 0.5, 0.9])
    assert batch_ranks(scores).tolist() == [1.5, 0, 1.5, 3]  # the two 0.5s share the mean of places 1 and 2
    assert batch_ranks(torch.zeros(64)).tolist() == [31.5] * 64
    # mask[i][j]: r_j - r_i > I, i.e. pair j scores higher and must get the higher cosine. The tied 0.5s never pair
    # up and count alike: at I = 1, 0.2 pairs with both (1.5 ranks up), as both pair with 0.9.
    expected = {
        0: [[0, 0, 0, 1], [1, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]],
        1: [[0, 0, 0, 1], [1, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]],
        2: [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]],
    }
    for interval, mask in expected.items():
        assert rank_pair_mask(scores, interval).int().tolist() == mask, interval


def test_which_pairs_count_never_depends_on_where_tied_pairs_sit() -> None:
    """With ranks broken by position, s = [1, 1, 1, 2, 2] at I = 2 kept (0, 3), (0, 4), (1, 4) but not (1, 3),
    (2, 3) or (2, 4) (issue 53): average ranks keep every pair of a 1 and a 2, in any order of the batch."""
    scores = torch.tensor([1.0, 1.0, 1.0, 2.0, 2.0])
    kept = {(i, j) for i, j in rank_pair_mask(scores, 2).nonzero().tolist()}
    assert kept == {(i, j) for i in range(3) for j in (3, 4)}
    for seed in range(5):
        perm = torch.randperm(5, generator=torch.Generator().manual_seed(seed))
        shuffled = rank_pair_mask(scores[perm], 2)
        assert torch.equal(shuffled, rank_pair_mask(scores, 2)[perm][:, perm])


def test_equal_scores_never_pair_in_the_rank_mask() -> None:
    kept = rank_pair_mask(torch.tensor([1.0, 1.0, 2.0]), 0.125)
    assert {(i, j) for i, j in kept.nonzero().tolist()} == {(0, 2), (1, 2)}
    assert not rank_pair_mask(torch.zeros(64), 0).any()


@pytest.mark.parametrize("interval", [0, 0.125])
def test_tied_scores_never_enter_the_rank_term(tiny_model, interval: float) -> None:
    cosines = torch.tensor([0.9, 0.1], dtype=torch.float64)  # were ties ranked by position, 1 should beat 0
    embeddings = _pairs_at_angles(torch.arccos(cosines).tolist())
    loss = RAOELoss(tiny_model, tau=20.0, interval=interval, w_angle=0.0)
    got = loss.compute_loss_from_embeddings(embeddings, _labels([0.5, 0.5], [0, 0], dtype=torch.float64))
    assert got.item() == 0.0  # log(1 + an empty sum)


def test_the_loss_is_the_weighted_sum_of_its_terms(tiny_model) -> None:
    torch.manual_seed(2)
    embeddings = [torch.randn(10, 6), torch.randn(10, 6)]
    labels = torch.stack((torch.rand(10), torch.randint(0, 3, (10,)).float()), dim=1)

    def value(**weights: float) -> float:
        return RAOELoss(tiny_model, **weights).compute_loss_from_embeddings(embeddings, labels).item()

    rank, angle = value(w_angle=0.0), value(w_rank=0.0)
    assert rank > 0 and angle > 0
    assert value(w_rank=0.5, w_angle=2.0) == pytest.approx(0.5 * rank + 2.0 * angle, rel=1e-6)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["c=1", "c=-1"])
def test_no_nan_or_inf_at_identical_or_opposite_embeddings(tiny_model, sign: float) -> None:
    first = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]], requires_grad=True)
    second = torch.tensor([[sign, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 2.0]], requires_grad=True)
    # Pair 0 (cosine exactly +-1) takes part in both terms: it has the top score and the most related label.
    labels = _labels([0.9, 0.5, 0.3, 0.1], [0, 1, 1, 2])
    loss = RAOELoss(tiny_model, interval=0).compute_loss_from_embeddings([first, second], labels)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(first.grad).all() and torch.isfinite(second.grad).all()
    assert first.grad.abs().sum() > 0


def test_a_zero_weight_skips_its_term(tiny_model, monkeypatch) -> None:
    embeddings = _pairs_at_angles([0.2, 0.4, 0.6])
    labels = _labels([0.1, 0.5, 0.9], [2, 1, 0])

    def not_called(*_args, **_kwargs):
        raise AssertionError("a term with weight 0 was computed")

    monkeypatch.setattr("core.losses.raoe.rank_pair_mask", not_called)
    assert RAOELoss(tiny_model, w_rank=0.0).compute_loss_from_embeddings(embeddings, labels) > 0
    monkeypatch.undo()
    monkeypatch.setattr(torch, "arccos", not_called)
    assert RAOELoss(tiny_model, interval=0, w_angle=0.0).compute_loss_from_embeddings(embeddings, labels) > 0


def test_a_tiny_model_trained_five_steps_lowers_the_loss(fresh_model) -> None:
    fresh_model.eval()  # deterministic before / after values; gradients flow regardless
    features = [fresh_model.tokenize(TEXTS1), fresh_model.tokenize(TEXTS2)]
    labels = _labels([0.9, 0.6, 0.1, 0.8, 0.5, 0.4, 0.2, 0.3], [0, 1, 2, 0, 1, 1, 2, 2])
    loss_fn = RAOELoss(fresh_model, interval=1)
    optimizer = torch.optim.Adam(fresh_model.parameters(), lr=1e-3)
    before = loss_fn(features, labels).item()
    for _ in range(5):
        optimizer.zero_grad()
        loss = loss_fn(features, labels)
        loss.backward()
        optimizer.step()
    assert loss_fn(features, labels).item() < before


@pytest.mark.parametrize("kwargs", [
    {"tau": 0.0}, {"interval": -1}, {"interval": -0.5}, {"interval": math.nan}, {"interval": math.inf},
    {"interval": "2"}, {"w_rank": 0.0, "w_angle": 0.0}, {"w_rank": -1.0},
    {"gate": "labels"},
])
def test_bad_settings_are_user_errors(tiny_model, kwargs: dict) -> None:
    with pytest.raises(UserError):
        RAOELoss(tiny_model, **kwargs)


def test_labels_without_score_and_ordinal_columns_are_a_user_error(tiny_model) -> None:
    with pytest.raises(UserError, match=r"\(3, 2\)"):
        RAOELoss(tiny_model).compute_loss_from_embeddings([torch.randn(3, 4), torch.randn(3, 4)], torch.zeros(3))


def test_config_and_citation(tiny_model) -> None:
    loss = RAOELoss(tiny_model, tau=10.0, interval=3, w_rank=1.0, w_angle=0.5, gate="score")
    assert loss.get_config_dict() == {"tau": 10.0, "interval": 3, "w_rank": 1.0, "w_angle": 0.5, "gate": "score"}
    assert "RAOE" in loss.citation
