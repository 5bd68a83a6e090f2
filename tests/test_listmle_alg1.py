"""ListMLE targets by seed 003's Algorithm 1 (issue 24): on a chain list each anchor's members from it onward are
nudged toward list order and the nudge is mirrored, so a teacher that already follows the chain is unchanged and the
targets stay symmetric; a star list trains and scores anchor 0 only; a list file says its shape (--list-shape), and
a bad shape is one line with exit 2."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

import core.evaluation.ordering as ordering
import core.losses.listmle as listmle
from core.cli import main
from core.data.lists import ListCorpus, ListReport, ListSplit, build_lists, detect_list_columns
from core.data.pairs import nli_lists
from core.data.pairs import build_pairs, detect_pair_columns
from core.evaluation.ordering import ordered_rows, ordering_metrics
from core.losses.listmle import ListMLELoss, nudged_targets, pack_label
from core.training.card import contrastlab_card_section
from core.training.config import LIST_SHAPES, TrainConfig
from core.training.listmle import list_examples

WORDS = ["cat", "dog", "car", "tree", "house", "river", "music", "bread", "stone", "cloud"]


def chain_teacher(n: int) -> np.ndarray:
    """Similarity falling with distance along the list: every anchor's members after it are in list order."""
    place = np.arange(n)
    return np.exp(-np.abs(place[:, None] - place[None, :]) / 4)


def random_teacher(n: int, seed: int) -> np.ndarray:
    """A symmetric matrix of cosine-like values below the diagonal's 1."""
    phi = np.random.default_rng(seed).uniform(-0.9, 0.95, (n, n))
    phi = (phi + phi.T) / 2
    np.fill_diagonal(phi, 1.0)
    return phi


# ---------------------------------------------------------------- targets


@pytest.mark.parametrize("w", [0.5, 0.7, 2.0])
def test_a_teacher_that_follows_the_chain_is_unchanged(w):
    """The issue's chain of 8 (the per-anchor global order moved it by up to 0.26 at w = 0.5)."""
    phi = chain_teacher(8)
    np.testing.assert_allclose(nudged_targets(phi, w, "chain"), phi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(nudged_targets(phi, w, "star")[0], phi[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("n, seed", [(3, 0), (5, 1), (8, 2), (33, 3)])
@pytest.mark.parametrize("w", [0.5, 2.0])
def test_chain_targets_are_symmetric(n, seed, w):
    phi = random_teacher(n, seed)
    out = nudged_targets(phi, w, "chain")
    np.testing.assert_allclose(out, out.T, rtol=0, atol=1e-12)
    assert not np.allclose(out, phi)  # a random teacher disagrees with the chain somewhere


def test_a_hand_built_swap_moves_each_member_by_exactly_log_w_delta_plus_one():
    """The chain teacher with members 3 and 4 swapped in anchor 1's row only: the list ranks 3 above 4, so 3 rises
    and 4 falls by log(w |Delta| + 1), Delta = phi[1, 3] - phi[1, 4], mirrored; nothing else moves."""
    phi = chain_teacher(6)
    low, high = phi[1, 4], phi[1, 3]
    phi[1, 3] = phi[3, 1] = low
    phi[1, 4] = phi[4, 1] = high
    assert all(np.all(np.diff(phi[i, i:]) < 0) for i in (0, 2, 3, 4))  # the other rows still follow the chain
    w = 0.7
    step = math.log(w * abs(low - high) + 1)
    expected = phi.copy()
    expected[1, 3] = expected[3, 1] = low + step
    expected[1, 4] = expected[4, 1] = high - step
    np.testing.assert_allclose(nudged_targets(phi, w, "chain"), expected, rtol=0, atol=1e-12)


def test_star_targets_nudge_row_0_only():
    phi = random_teacher(6, 4)
    out = nudged_targets(phi, 0.7, "star")
    np.testing.assert_array_equal(out[1:], phi[1:])
    assert not np.allclose(out[0], phi[0])


# ---------------------------------------------------------------- what a run trains


def list_corpus(shape: str, n_lists: int = 14) -> ListCorpus:
    rows = [{"list_id": f"L{i:02d}", "rank": rank, "split": "test" if i % 5 == 0 else "train",
             "text": f"the {WORDS[i % 10]} and the {WORDS[(i + rank) % 10]} number {i} {rank}"}
            for i in range(n_lists) for rank in range(1, 4 + i % 4)]
    df = pd.DataFrame(rows)
    return build_lists(df, detect_list_columns(df), "lists", shape=shape)


def score_gradient(monkeypatch, tiny_model, shape: str) -> tuple[np.ndarray, np.ndarray]:
    """(the loss's gradient on each list's score matrix, the presence mask) for the recipe's labels of a list file
    of this shape: a recorder keeps the scores ListMLELoss hands to listmle_from_scores."""
    cfg = TrainConfig(corpus="x", recipe="listmle", w=0.7, examples=100, list_shape=shape)
    dataset, _ = list_examples(cfg, list_corpus(shape), tiny_model, "ranked lists")
    size = sum(c.startswith("m") for c in dataset.column_names)
    labels = torch.tensor(dataset["label"], dtype=torch.float32)
    seen = []

    def recorder(scores, *args):
        scores.retain_grad()
        seen.append(scores)
        return real(scores, *args)

    real = listmle.listmle_from_scores
    monkeypatch.setattr(listmle, "listmle_from_scores", recorder)
    members = [torch.randn(len(labels), 8, generator=torch.Generator().manual_seed(i), requires_grad=True)
               for i in range(size)]
    ListMLELoss(None).compute_loss_from_embeddings(members, labels).backward()
    return seen[0].grad.numpy(), labels[:, size * size: size * size + size].numpy()


def test_a_star_list_trains_only_row_0(monkeypatch, tiny_model):
    grad, present = score_gradient(monkeypatch, tiny_model, "star")
    assert np.abs(grad[:, 1:, :]).max() == 0.0  # anchors 1.. add nothing to the loss
    for g, mask in zip(grad, present):
        assert np.all(g[0, 1:int(mask.sum())] != 0)  # anchor 0 ranks every other member


def test_a_chain_list_trains_every_row(monkeypatch, tiny_model):
    grad, present = score_gradient(monkeypatch, tiny_model, "chain")
    for g, mask in zip(grad, present):
        n = int(mask.sum())
        assert all(np.abs(g[j, :n]).sum() > 0 for j in range(n))


def test_the_loss_sums_a_lists_anchors_and_tau_defaults_to_1():
    """Two copies of one anchor's row in a chain list cost twice one row in a star list (summed, not averaged)."""
    scores = torch.tensor([[[1.0, 0.2, 0.5], [0.2, 1.0, 0.1], [0.5, 0.1, 1.0]]])
    targets = -torch.tensor([[[0.0, 1, 2], [1, 0, 2], [1, 2, 0]]])  # anchors 0 and 1 rank the same way
    mask = torch.ones(1, 3)
    star = listmle.listmle_from_scores(scores, targets, mask, torch.tensor([[1.0, 0, 0]]), 1.0)
    both = listmle.listmle_from_scores(scores, targets, mask, torch.tensor([[1.0, 1, 0]]), 1.0)
    row1 = listmle.listmle_from_scores(scores, targets, mask, torch.tensor([[0.0, 1, 0]]), 1.0)
    assert both.item() == pytest.approx(star.item() + row1.item())
    assert ListMLELoss(None).tau == 1.0  # the loss as the paper writes it
    assert TrainConfig(corpus="x", recipe="listmle").tau == 0.05  # the recipe's default: a deviation (bench listmle)


def test_the_settings_shapes_are_the_losss():
    assert tuple(LIST_SHAPES) == listmle.SHAPES


def test_nli_lists_are_star_lists():
    rows = [(f"premise {p}", f"hypothesis {p} {label}", label) for p in range(12)
            for label in ("entailment", "neutral", "contradiction")]
    df = pd.DataFrame({"text1": [r[0] for r in rows], "text2": [r[1] for r in rows], "label": [r[2] for r in rows],
                       "split": ["test" if int(r[0].split()[1]) >= 9 else "train" for r in rows]})
    assert nli_lists(build_pairs(df, detect_pair_columns(df), "nli")).shape == "star"


# ---------------------------------------------------------------- what a run is scored on


def test_ordered_rows_are_the_rows_the_loss_trains():
    sims = random_teacher(6, 5)
    star, chain = ordered_rows(sims, "star"), ordered_rows(sims, "chain")
    assert len(star) == 1 and np.array_equal(star[0], sims[0, 1:])
    assert [len(r) for r in chain] == [5, 4, 3, 2]  # anchors 0..3; anchor 4 has one member after it, always in order
    assert all(np.array_equal(r, sims[i, i + 1:]) for i, r in enumerate(chain))
    anchors = {shape: np.flatnonzero(pack_label(sims, 6, shape)[6 * 6 + 6:]) for shape in LIST_SHAPES}
    assert anchors["star"].tolist() == [0] and set(range(4)) <= set(anchors["chain"])


def test_ordering_metrics_score_anchor_0_of_a_star_list_and_every_anchor_of_a_chain(monkeypatch):
    """Members at 0, 30, -60 and 90 degrees: anchor 0 ranks them in list order, anchor 1 (30) puts 90 above -60."""
    degrees = {"a": 0, "b": 30, "c": -60, "d": 90}
    vectors = {t: [math.cos(math.radians(d)), math.sin(math.radians(d))] for t, d in degrees.items()}
    monkeypatch.setattr(ordering, "encode_cached", lambda _model, texts, **_: np.array([vectors[t] for t in texts]))
    split = ListSplit(ids=["x"], lists=[list("abcd")])
    report = ListReport(source="list file", rows_read=4, lists_kept=1, skipped=0, split_source="test")

    def scored(shape: str) -> dict:
        corpus = ListCorpus(name="t", train=split, test=split, target_split="test", report=report, shape=shape)
        return ordering_metrics(None, corpus)

    star, chain = scored("star"), scored("chain")
    assert (star["ordering_accuracy"], star["kendall_tau"], star["list_shape"]) == (1.0, 1.0, "star")
    assert chain["ordering_accuracy"] == 0.0 and chain["kendall_tau"] == pytest.approx(0.0)  # rows: tau 1 and -1
    assert chain["n_lists"] == star["n_lists"] == 1 and chain["list_shape"] == "chain"


def test_the_shape_is_part_of_the_lists_fingerprint_and_summary():
    chain, star = list_corpus("chain"), list_corpus("star")
    assert chain.fingerprint != star.fingerprint  # cached ordering results of the two never mix
    assert chain.summary()["shape"] == "chain" and star.summary()["shape"] == "star"


def test_the_card_names_the_shape_tau_and_the_sum_over_anchors(tiny_model):
    cfg = TrainConfig(corpus="lists.csv", recipe="listmle", examples=100, tau=0.05, list_shape="star")
    corpus = list_corpus("star")
    _, stats = list_examples(cfg, corpus, tiny_model, "ranked lists")
    card = contrastlab_card_section(cfg, {"corpus": corpus.summary(), "examples": stats})
    assert "`tau` = 0.05" in card and "train star lists" in card
    assert "- **Loss:** ListMLE on star lists, summed over each list's anchors (its first member only)" in card


# ---------------------------------------------------------------- the CLI


def write_lists(tmp_path) -> str:
    path = tmp_path / "lists.csv"
    rows = [{"list_id": f"L{i:02d}", "rank": rank, "split": "test" if i % 5 == 0 else "train",
             "text": f"the {WORDS[i % 10]} and the {WORDS[(i + rank) % 10]} number {i} {rank}"}
            for i in range(14) for rank in range(1, 6)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("value", ["", "Chain ", "tree", "3"])
@pytest.mark.parametrize("command", ["evaluate", "train"])
def test_a_bad_list_shape_is_one_line_and_exit_2(command, value, tmp_path, tiny_model_dir, capsys):
    argv = [command, write_lists(tmp_path), "--model", str(tiny_model_dir), "--list-shape", value]
    assert main(argv + (["--recipe", "listmle"] if command == "train" else [])) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: list_shape must be one of chain, star"), err


def test_evaluate_scores_a_list_file_as_the_shape_it_is_given(tmp_path, tiny_model_dir, capsys):
    path = write_lists(tmp_path)
    results = {}
    for shape in LIST_SHAPES:
        assert main(["evaluate", path, "--model", str(tiny_model_dir), "--list-shape", shape, "--json"]) == 0
        results[shape] = json.loads(capsys.readouterr().out)
    assert results["star"]["list_shape"] == "star" and results["chain"]["list_shape"] == "chain"
    assert results["star"]["n_lists"] == results["chain"]["n_lists"] == 3
    assert main(["evaluate", path, "--model", str(tiny_model_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["list_shape"] == "chain"  # a list file is a chain by default


def test_evaluate_refuses_a_list_shape_for_a_corpus_that_is_not_lists(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "texts.csv"
    pd.DataFrame({"text": [f"text {i}" for i in range(40)], "label": ["a", "b"] * 20}).to_csv(path, index=False)
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--list-shape", "star"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--list-shape" in err, err
