"""ListMLE (issue 10; targets by Algorithm 1, issue 24): the loss against its formula written out, padding that never
turns the gradient into NaN, the teacher's targets nudged toward the list order by exactly log(w |Delta| + 1), the
label layout, the ordering metrics, the recipe's dataset, and a short run on a list file through the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import Tensor

from core.cli import main
from core.data.lists import ListCorpus, build_lists, detect_list_columns
from core.evaluation.ordering import ordering_scores
from core.losses.listmle import ListMLELoss, listmle_from_scores, nudged_targets, order_targets, pack_label
from core.models.encode import encode
from core.runs.store import RunStore
from core.training.config import TrainConfig
from core.training.listmle import list_examples

WORDS = ["cat", "dog", "car", "tree", "house", "river", "music", "bread", "stone", "cloud"]


# ---------------------------------------------------------------- the loss


def listmle_loop(scores: np.ndarray, targets: np.ndarray, mask: np.ndarray, anchors: np.ndarray, tau: float,
                 with_anchor: bool = False) -> float:
    """docs/definitions.md written out: each present anchor j ranks the other present members by targets[j]
    descending (`with_anchor`: itself first, then those); a list's loss is the sum over its anchors of
    sum_i [log sum_{m>=i} exp(z_pi(m)) - z_pi(i)], and the batch's the mean over its lists."""
    per_list = []
    for b in range(scores.shape[0]):
        present = [k for k in range(scores.shape[1]) if mask[b, k]]
        total = 0.0
        for j in (j for j in present if anchors[b, j]):
            others = [k for k in present if k != j]
            pi = [j] * with_anchor + sorted(others, key=lambda k: -targets[b, j, k])
            z = [scores[b, j, k] / tau for k in pi]
            total += sum(log_sum_exp(z[i:]) - z[i] for i in range(len(z)))
        per_list.append(total)
    return float(np.mean(per_list))


def log_sum_exp(values: list[float]) -> float:
    top = max(values)  # shifted, so that a tiny tau does not overflow the reference itself
    return top + math.log(sum(math.exp(v - top) for v in values))


def random_batch(seed: int, sizes: list[int], size: int, star: bool = False) -> tuple[np.ndarray, ...]:
    """Random cosines in [-1, 1] and distinct targets; members past each list's length are padding (mask 0) with
    arbitrary scores and targets, which the loss must ignore. Anchors: every present member, or member 0 (star)."""
    rng = np.random.default_rng(seed)
    scores = rng.uniform(-1, 1, (len(sizes), size, size))
    targets = rng.normal(size=(len(sizes), size, size))
    mask = np.array([[1.0] * n + [0.0] * (size - n) for n in sizes])
    anchors = np.zeros_like(mask) if star else mask.copy()
    anchors[:, 0] = 1.0
    return scores, targets, mask, anchors


def loss_of(scores: np.ndarray, targets: np.ndarray, mask: np.ndarray, anchors: np.ndarray, tau: float) -> Tensor:
    return listmle_from_scores(*(torch.tensor(a) for a in (scores, targets, mask, anchors)), tau)


@pytest.mark.parametrize("seed, sizes, tau, star", [(0, [5, 3, 4], 0.05, False), (1, [6, 6], 0.05, False),
                                                    (2, [3, 7, 5, 4], 0.5, False), (3, [5, 3, 4], 1.0, True)])
def test_loss_matches_the_formula_written_out_with_padding(seed, sizes, tau, star):
    batch = random_batch(seed, sizes, size=max(sizes) + 1, star=star)  # every list has padding
    assert loss_of(*batch, tau).item() == pytest.approx(listmle_loop(*batch, tau), rel=1e-6, abs=1e-5)


@pytest.mark.parametrize("star", [False, True])
def test_the_anchor_in_its_own_list_is_ranked_first_as_eq_8_writes_it(star):
    """Eq. 8 ranks s_j1 .. s_jn, s_jj included (issue 53): with_anchor puts the anchor first in its own list, even
    where a nudged target of another member passes the anchor's own (1.0), and adds exactly its terms."""
    scores, targets, mask, anchors = random_batch(7, [5, 3, 4], size=6, star=star)
    targets[:, 0, 1] = 5.0  # a member whose target passes anything on the diagonal
    for b in range(3):
        np.fill_diagonal(scores[b], 1.0)  # a member's cosine with itself
    tensors = [torch.tensor(a) for a in (scores, targets, mask, anchors)]
    got = listmle_from_scores(*tensors, 0.05, with_anchor=True).item()
    assert got == pytest.approx(listmle_loop(scores, targets, mask, anchors, 0.05, with_anchor=True), rel=1e-6)
    assert got > listmle_from_scores(*tensors, 0.05).item()  # the anchor's own term adds a positive cost
    assert ListMLELoss(None, tau=0.05, with_anchor=True).get_config_dict() == {"tau": 0.05, "with_anchor": True}


def test_padding_stays_out_of_the_loss_at_a_tiny_tau():
    scores, targets, mask, anchors = random_batch(5, [4, 3], size=5)
    scores = scores / 4 - 0.75  # cosines in [-1, -0.5]: cosine / tau at or below PAD_LOGIT
    got = loss_of(scores, targets, mask, anchors, 5e-5)
    assert got.item() == pytest.approx(listmle_loop(scores, targets, mask, anchors, 5e-5), rel=1e-6)


def test_padding_contents_do_not_change_the_loss():
    scores, targets, mask, anchors = random_batch(3, [4, 3], size=6)
    base = loss_of(scores, targets, mask, anchors, 0.05)
    for b, row in enumerate(mask == 0):  # padded members that would be the most similar and the top targets
        scores[b, row, :] = scores[b, :, row] = 1.0
        targets[b, row, :] = targets[b, :, row] = 100.0
    anchors[:] = 1.0  # a padded member marked as an anchor still has no row
    again = loss_of(scores, targets, mask, anchors, 0.05)
    assert again.item() == pytest.approx(base.item(), abs=1e-9)


def test_gradients_are_finite_and_zero_on_padding():
    scores, targets, mask, anchors = random_batch(4, [3, 5], size=5)
    s = torch.tensor(scores, requires_grad=True)
    listmle_from_scores(s, torch.tensor(targets), torch.tensor(mask), torch.tensor(anchors), 0.05).backward()
    grad = s.grad.numpy()
    assert np.isfinite(grad).all()
    assert (grad[0, 3:, :] == 0).all() and (grad[0, :, 3:] == 0).all()  # list 0 has 3 members of 5
    assert np.abs(grad[1]).sum() > 0 and np.abs(grad[0, :3, :3]).sum() > 0


def lists_batch(model, lists: list[list[str]], targets: list[np.ndarray],
                shape: str = "chain") -> tuple[list[dict], torch.Tensor]:
    """Features per list position (padded with empty texts) and packed labels, as the trainer collates them."""
    size = max(map(len, lists))
    features = [model.tokenize([members[i] if i < len(members) else "" for members in lists]) for i in range(size)]
    labels = torch.tensor([pack_label(t, size, shape) for t in targets], dtype=torch.float32)
    return features, labels


def teacher_phi(model, members: list[str]) -> np.ndarray:
    emb = encode(model, members).embeddings
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    return emb @ emb.T


def test_teachers_own_order_costs_less_than_its_reverse(tiny_model):
    lists = [[f"the {WORDS[(i + k) % 10]} near the {WORDS[(3 * i + k) % 10]} {k}" for k in range(n)]
             for i, n in enumerate([5, 3, 4])]
    own = [nudged_targets(teacher_phi(tiny_model, members), w=0.0, shape="chain") for members in lists]
    loss = ListMLELoss(tiny_model, tau=0.05)
    was_training = tiny_model.training
    tiny_model.eval()  # no dropout: both losses see the same cosines
    try:
        with torch.no_grad():
            low = loss(*lists_batch(tiny_model, lists, own)).item()
            high = loss(*lists_batch(tiny_model, lists, [-t for t in own])).item()
    finally:
        tiny_model.train(was_training)
    assert np.isfinite(low) and np.isfinite(high) and low < high


def test_model_gradients_are_finite_with_padded_lists(tiny_model_dir):
    from core.models.loading import load_model

    model = load_model(str(tiny_model_dir), "cpu")  # its own copy: backward writes .grad
    model.train()
    lists = [["a cat", "a dog", "a car", "a tree", "a house"], ["the river", "the music", "the bread"]]
    targets = [order_targets(len(members)) for members in lists]
    loss = ListMLELoss(model, tau=0.05)(*lists_batch(model, lists, targets))
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert np.isfinite(loss.item()) and grads
    assert all(torch.isfinite(g).all() for g in grads) and any(g.abs().sum() > 0 for g in grads)


def test_tau_must_be_positive(tiny_model):
    with pytest.raises(ValueError, match="tau"):
        ListMLELoss(tiny_model, tau=0.0)


# ---------------------------------------------------------------- targets


def symmetric(row0: list[float], seed: int = 0) -> np.ndarray:
    """A symmetric similarity matrix with ones on the diagonal and the given anchor row."""
    n = len(row0) + 1
    rng = np.random.default_rng(seed)
    phi = rng.uniform(-0.5, 0.9, (n, n))
    phi = (phi + phi.T) / 2
    np.fill_diagonal(phi, 1.0)
    phi[0, 1:] = phi[1:, 0] = row0
    return phi


def test_nudged_targets_push_by_exactly_the_log_gap():
    # the list says 1 > 2 > 3 > 4; the teacher ranks member 2 (0.8) > 3 (0.5) > 1 (0.2) > 4 (0.1)
    phi = symmetric([0.2, 0.8, 0.5, 0.1])
    w = 0.7
    out = nudged_targets(phi, w, "star")
    # row 0 in list order: 1, 0.2, 0.8, 0.5, 0.1; the teacher places member 1 at 3, 2 at 1, 3 at 2, 4 at 4, and
    # Delta is each member's value minus the value at the list position where the teacher places it
    assert out[0, 1] == pytest.approx(0.2 + math.log(w * abs(0.2 - 0.5) + 1))  # list ranks it higher: up
    assert out[0, 2] == pytest.approx(0.8 - math.log(w * abs(0.8 - 0.2) + 1))  # lower: down by its own Delta
    assert out[0, 3] == pytest.approx(0.5 - math.log(w * abs(0.5 - 0.8) + 1))
    assert out[0, 4] == pytest.approx(0.1)  # both put it last: unchanged
    np.testing.assert_array_equal(np.diag(out), np.diag(phi))


@pytest.mark.parametrize("shape", ["chain", "star"])
def test_nudged_targets_keep_a_row_that_agrees_and_w_zero_keeps_all(shape):
    phi = symmetric([0.9, 0.6, 0.3, -0.2])
    np.testing.assert_allclose(nudged_targets(phi, 5.0, shape)[0], phi[0])
    phi = symmetric(list(np.random.default_rng(1).uniform(-1, 0.9, 5)), seed=1)
    np.testing.assert_allclose(nudged_targets(phi, 0.0, shape), phi)
    moved = nudged_targets(phi, 2.0, shape)
    assert not np.allclose(moved, phi) and np.isfinite(moved).all()


def test_nudged_targets_refuse_an_unknown_shape():
    with pytest.raises(ValueError, match="shape"):
        nudged_targets(np.eye(3), 0.5, "tree")


def test_a_larger_w_moves_the_disagreeing_members_further():
    phi = symmetric([0.2, 0.8, 0.5, 0.1])
    small, large = nudged_targets(phi, 0.5, "star"), nudged_targets(phi, 50.0, "star")
    assert large[0, 1] > small[0, 1] > phi[0, 1]
    assert large[0, 2] < small[0, 2] < phi[0, 2] and large[0, 3] < small[0, 3] < phi[0, 3]
    assert large[0, 4] == small[0, 4] == phi[0, 4]


@pytest.mark.parametrize("gap", [0.01, 0.1, 0.5, 1.5])
def test_w_must_exceed_a_half_to_reverse_an_adjacent_swap(gap):
    """Two neighbours the teacher swaps move toward each other by log(w * gap + 1) each; that closes the gap only
    when 2 log(w * gap + 1) > gap, never at w = 0.5 (log(1 + x) < x), always at w = 1 for cosine gaps (< 2.5)."""
    phi = np.eye(3)
    phi[0, 1] = phi[1, 0] = 0.9 - gap  # the list puts member 1 first, the teacher prefers member 2
    phi[0, 2] = phi[2, 0] = 0.9  # cosines: below the diagonal's 1, which Algorithm 1 sorts with them
    half = nudged_targets(phi, 0.5, "chain")[0]
    one = nudged_targets(phi, 1.0, "chain")[0]
    assert half[2] > half[1] and one[1] > one[2]


def test_order_targets_rank_each_row_by_distance_along_the_list():
    """Row 0 in list order; any anchor's members after it in list order and those before it nearest first (the
    chain's order either side of the anchor)."""
    t = order_targets(5)
    assert t.shape == (5, 5)
    assert sorted(range(1, 5), key=lambda k: -t[0, k]) == [1, 2, 3, 4]
    for j in range(5):
        after, before = list(range(j + 1, 5)), list(range(j - 1, -1, -1))
        assert sorted(after, key=lambda k: -t[j, k]) == after and sorted(before, key=lambda k: -t[j, k]) == before


def test_pack_label_is_targets_then_presence_then_anchors_padded():
    targets = np.arange(9, dtype=float).reshape(3, 3) + 1
    label = pack_label(targets, 4, "chain")
    assert len(label) == 4 * 4 + 4 + 4
    grid = np.array(label[:16]).reshape(4, 4)
    np.testing.assert_array_equal(grid[:3, :3], targets)
    assert (grid[3] == 0).all() and (grid[:, 3] == 0).all()
    assert label[16:20] == [1.0, 1.0, 1.0, 0.0] and label[20:] == [1.0, 1.0, 1.0, 0.0]  # every member an anchor
    assert pack_label(targets, 4, "star")[16:] == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # member 0 only
    assert pack_label(targets, 3, "chain")[9:] == [1.0] * 6


# ---------------------------------------------------------------- ordering metrics


def test_ordering_scores_exact_reversed_and_tied():
    """One row per list (a star list's anchor row)."""
    assert ordering_scores([[np.array([0.9, 0.5, 0.1])]]) == {"ordering_accuracy": 1.0, "kendall_tau": 1.0,
                                                             "n_lists": 1}
    reverse = ordering_scores([[np.array([0.1, 0.5, 0.9, 0.95])]])
    assert reverse["ordering_accuracy"] == 0.0 and reverse["kendall_tau"] == pytest.approx(-1.0)
    tie = ordering_scores([[np.array([0.9, 0.9, 0.1])]])
    assert tie["ordering_accuracy"] == 0.0 and 0 < tie["kendall_tau"] < 1
    flat = ordering_scores([[np.array([0.3, 0.3, 0.3])]])
    assert flat == {"ordering_accuracy": 0.0, "kendall_tau": 0.0, "n_lists": 1}
    mixed = ordering_scores([[np.array([0.9, 0.5, 0.1])], [np.array([0.1, 0.5, 0.9])],
                             [np.array([0.9, 0.1, 0.5, 0.0])]])
    assert mixed["ordering_accuracy"] == pytest.approx(1 / 3) and mixed["n_lists"] == 3
    assert mixed["kendall_tau"] == pytest.approx((1 - 1 + 4 / 6) / 3)  # the third: 5 of 6 pairs concordant


# ---------------------------------------------------------------- the recipe's dataset


def list_table(n_lists: int = 14, split: bool = False) -> pd.DataFrame:
    """Lists of 3 to 6 members (list i has 3 + i % 4), rows shuffled."""
    rows = []
    for i in range(n_lists):
        for rank in range(1, 4 + i % 4):
            row = {"list_id": f"L{i:02d}", "rank": rank,
                   "text": f"the {WORDS[i % 10]} and the {WORDS[(i + rank) % 10]} number {i} {rank}"}
            if split:
                row["split"] = "test" if i % 5 == 0 else "train"
            rows.append(row)
    return pd.DataFrame(rows).sample(frac=1, random_state=0).reset_index(drop=True)


def list_corpus(n_lists: int = 14) -> ListCorpus:
    df = list_table(n_lists)
    return build_lists(df, detect_list_columns(df), "lists")


def test_list_examples_hold_one_column_per_member_and_the_packed_label(tiny_model):
    corpus = list_corpus(30)  # 27 training lists
    cfg = TrainConfig(corpus="x", recipe="listmle", target="order", examples=8, seed=3)
    dataset, stats = list_examples(cfg, corpus, tiny_model, "ranked lists")
    size = stats["list_size"][1]
    assert dataset.column_names == [*(f"m{i}" for i in range(size)), "label"] and len(dataset) == 8
    by_anchor = {members[0]: members for members in corpus.train.lists}
    for i in range(len(dataset)):
        row = dataset[i]
        members = by_anchor[row["m0"]]
        assert [row[f"m{k}"] for k in range(size)] == members + [""] * (size - len(members))
        assert len(row["label"]) == size * size + 2 * size
        np.testing.assert_allclose(row["label"], pack_label(order_targets(len(members)), size, "chain"))
    assert stats["examples"] == 8 and stats["source"] == "list file" and stats["target"] == "order"
    assert 0.0 <= stats["teacher_in_order"] <= 1.0

    again, _ = list_examples(cfg, corpus, tiny_model, "ranked lists")
    other, _ = list_examples(TrainConfig(**{**cfg.to_dict(), "seed": 4}), corpus, tiny_model, "ranked lists")
    assert again["m0"] == dataset["m0"] and other["m0"] != dataset["m0"]
    everything, _ = list_examples(TrainConfig(**{**cfg.to_dict(), "examples": 1000}), corpus, tiny_model, "x")
    assert everything["m0"] == [members[0] for members in corpus.train.lists]  # all of them, in corpus order


def test_list_examples_preview_shows_the_anchor_row(tiny_model):
    corpus = list_corpus(14)
    cfg = TrainConfig(corpus="x", recipe="listmle", w=0.0, examples=100)
    dataset, stats = list_examples(cfg, corpus, tiny_model, "ranked lists")
    members = corpus.train.lists[0]
    phi = teacher_phi(tiny_model, members)
    preview = stats["preview"]
    assert [p["rank"] for p in preview] == list(range(2, len(members) + 1))
    assert [p["text"] for p in preview] == members[1:]
    np.testing.assert_allclose([p["teacher"] for p in preview], phi[0, 1:], atol=1e-4)
    assert [p["target"] for p in preview] == [p["teacher"] for p in preview]  # w = 0: the teacher's own scores
    by_teacher = sorted(preview, key=lambda p: -p["teacher"])
    assert [p["teacher_rank"] for p in by_teacher] == list(range(2, len(members) + 1))
    assert [p["target_rank"] for p in preview] == [p["teacher_rank"] for p in preview]
    label = np.array(dataset[0]["label"])
    size = stats["list_size"][1]
    np.testing.assert_allclose(label[1:len(members)], phi[0, 1:], atol=1e-5)  # row 0 of phihat, packed
    assert label[size * size:].tolist() == ([1.0] * len(members) + [0.0] * (size - len(members))) * 2  # chain

    ordered = TrainConfig(corpus="x", recipe="listmle", target="order", examples=100)
    _, stats = list_examples(ordered, corpus, tiny_model, "ranked lists")
    assert [p["target_rank"] for p in stats["preview"]] == list(range(2, len(members) + 1))


# ---------------------------------------------------------------- end to end


def write_list_file(tmp_path: Path, n_lists: int = 14) -> Path:
    path = tmp_path / "lists.csv"
    list_table(n_lists, split=True).to_csv(path, index=False)
    return path


def test_cli_evaluate_reports_ordering_on_a_list_file(tmp_path, tiny_model_dir, capsys):
    code = main(["evaluate", str(write_list_file(tmp_path)), "--model", str(tiny_model_dir), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["kind"] == "lists" and out["target_split"] == "test"
    assert out["n_lists"] == 3  # lists 0, 5 and 10 are marked test
    assert 0.0 <= out["ordering_accuracy"] <= 1.0 and -1.0 <= out["kendall_tau"] <= 1.0


def test_cli_trains_listmle_on_a_list_file_and_the_model_reloads(tmp_path, tiny_model_dir, capsys):
    from sentence_transformers import SentenceTransformer

    code = main(["train", str(write_list_file(tmp_path)), "--recipe", "listmle", "--model", str(tiny_model_dir),
                 "--examples", "20", "--epochs", "1", "--batch-size", "4", "--json", "--foreground"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "done"
    for when in ("before", "after"):
        m = out[when]
        assert m["kind"] == "lists" and m["n_lists"] == 3 and m["list_split"] == "test"
        assert 0.0 <= m["ordering_accuracy"] <= 1.0 and -1.0 <= m["kendall_tau"] <= 1.0
    run = RunStore().get(out["run_id"])
    examples = run.progress["summary"]["examples"]
    assert examples["examples"] == 11 and examples["source"] == "list file"  # all 11 training lists
    model = SentenceTransformer(out["model_path"], device="cpu")
    emb = model.encode(["the cat and the dog", "a river"])
    assert emb.shape[0] == 2 and np.isfinite(emb).all()
