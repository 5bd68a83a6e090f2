"""Issue 24 §4: the P@k / S@k rank discount as a setting (linear, as seed 000's text; none, as its released code's
default), part of every evaluation's cache key and recorded with the result; and a recipe's paper budget beside
its default, with the paper budget's ETA on this machine, on the Train page."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from core.cli import main
from core.data.corpus import demo_corpus_path, load_corpus
from core.evaluation.corpus_eval import evaluate_corpus
from core.evaluation.evaluate import EvalSettings
from core.evaluation.metrics import polarity_similarity, rank_weights
from core.models.rates import record_rate
from core.training.eta import FORWARD_BACKWARD, fmt_seconds, planned_seconds
from core.training.paper_budget import paper_budget_note
from core.training.recipe import PaperBudget
from core.training.recipes import RECIPES
from tests.test_pages_train_runs import open_page


# ---------------------------------------------------------------- the discount


@pytest.mark.parametrize("k", [1, 2, 3, 16, 50])
def test_rank_weights_none_is_uniform_and_both_sum_to_one(k):
    none, linear = rank_weights(k, "none"), rank_weights(k, "linear")
    assert none == pytest.approx(np.full(k, 1 / k))
    assert none.sum() == pytest.approx(1.0) and linear.sum() == pytest.approx(1.0)
    assert linear == pytest.approx(rank_weights(k))  # linear stays the default
    if k > 1:
        assert np.all(np.diff(linear) < 0)  # the linear one still favours the nearest neighbours
    with pytest.raises(ValueError):
        rank_weights(k, "uniform")


def _unit(degrees: float) -> list[float]:
    return [np.cos(np.radians(degrees)), np.sin(np.radians(degrees))]


def test_ps_without_discount_is_the_plain_mean_and_differs_from_linear_where_order_matters():
    # Target 0 (label 0) at 0°; its neighbours by cosine: 10° (label 0), 40° (label 1), 80° (label 1). Target 1
    # (label 1) at 180°; its three nearest all share its label, so there the order cannot matter for P.
    targets = np.array([_unit(0), _unit(180)])
    pool = np.array([_unit(10), _unit(40), _unit(80), _unit(170), _unit(190), _unit(200)])
    target_labels, pool_labels = np.array([0, 1]), np.array([0, 1, 1, 1, 1, 1])
    cos = np.cos(np.radians([[10, 40, 80], [10, 10, 20]]))

    none = polarity_similarity(targets, pool, targets, pool, target_labels, pool_labels, k=3, discount="none")
    assert none.target_polarity == pytest.approx([1 / 3, 1.0])
    assert none.target_similarity == pytest.approx(cos.mean(axis=1))
    assert none.polarity == pytest.approx(100 * (1 / 3 + 1) / 2)
    assert none.similarity == pytest.approx(100 * cos.mean())
    assert none.discount == "none" and none.as_dict()["discount"] == "none"

    linear = polarity_similarity(targets, pool, targets, pool, target_labels, pool_labels, k=3)
    w = np.array([3, 2, 1]) / 6
    assert linear.target_polarity == pytest.approx([0.5, 1.0])  # target 1's neighbours agree: same under both
    assert linear.target_similarity == pytest.approx(cos @ w)
    assert linear.polarity != pytest.approx(none.polarity) and linear.similarity != pytest.approx(none.similarity)
    assert linear.discount == "linear"


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(str(demo_corpus_path()))


def test_evaluation_cache_keeps_the_discounts_apart(tiny_model, corpus):
    timings: list[dict] = []

    def run(discount: str) -> dict:
        timings.append({})
        return evaluate_corpus(tiny_model, tiny_model, corpus, EvalSettings(discount=discount), timing=timings[-1])

    linear, none, again = run("linear"), run("none"), run("linear")
    assert [t["cached"] for t in timings] == [False, False, True]  # "none" computed, not read from linear's entry
    assert (linear["discount"], none["discount"], again["discount"]) == ("linear", "none", "linear")
    assert none["polarity"] != pytest.approx(linear["polarity"])
    assert again["polarity"] == linear["polarity"]


@pytest.mark.parametrize("value", ["", "Linear", "uniform", "1"])
@pytest.mark.parametrize("command", ["evaluate", "train"])
def test_cli_refuses_a_bad_discount_with_one_line(command, value, capsys):
    # --model names no model: the value is refused before anything is loaded or a run is made.
    assert main([command, str(demo_corpus_path()), "--model", "no-such-model", f"--discount={value}"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: discount must be one of linear, none, got {value!r}\n"


def test_cli_evaluate_records_the_discount(tiny_model_dir, capsys):
    assert main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--discount", "none",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["discount"] == "none"
    assert main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir)]) == 0
    assert "rank discount linear" in capsys.readouterr().out


# ---------------------------------------------------------------- the paper budget


def test_planned_seconds_counts_steps_evaluations_and_saving():
    # 30 texts per evaluation at 10 texts/s = 3 s, twice; 10 steps of 4 texts forward and backward; saving 2 s.
    assert planned_seconds(10, 4, 30, 10.0, 2.0) == pytest.approx(3 + 10 * 4 * FORWARD_BACKWARD / 10 + 3 + 2)


def test_crop_note_names_the_paper_budget_and_its_eta():
    crop = RECIPES["crop"]
    note = paper_budget_note(crop, 50.0, 1000, 1.0)
    eta = fmt_seconds(planned_seconds(100, 128, 1000, 50.0, 1.0))
    assert "100 batches of 64" in note and "32 batches of 64 (2,000 pairs, 1 epoch)" in note
    assert f"about {eta} on this machine" in note and "Max steps 100" in note
    assert paper_budget_note(crop, 5000.0, 1000, 1.0) != note  # the ETA follows this machine's rate
    unmeasured = paper_budget_note(crop, None, 1000, 1.0)
    assert "100 batches of 64" in unmeasured and "evaluations included" not in unmeasured
    assert "its time on this machine shows once an evaluation has measured" in unmeasured
    assert paper_budget_note(RECIPES["dropout"], 50.0, 1000, 1.0) == note  # the same setup, the same note


def test_no_note_without_a_paper_budget_or_where_the_default_matches():
    crop = RECIPES["crop"]
    assert paper_budget_note(RECIPES["triplet"], 50.0, 1000, 1.0) is None
    assert paper_budget_note(dataclasses.replace(crop, paper_budget=PaperBudget(32, 64, "x")), 50.0, 1000,
                             1.0) is None
    other_batch = paper_budget_note(dataclasses.replace(crop, paper_budget=PaperBudget(32, 128, "x")), 50.0, 1000,
                                    1.0)
    assert "32 batches of 128" in other_batch and "at batch size 128" in other_batch


def test_train_page_shows_the_crop_note(app, tiny_model):
    record_rate(tiny_model, 400.0)  # as an earlier evaluation on this machine would have
    at = open_page(app, "app_pages/2_Train.py")
    assert not [c for c in at.caption if "paper's budget" in c.value]  # supervised recipes declare none
    at.get("button_group")[0].set_value("Self-supervised").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="train:recipe:Self-supervised").value == "crop"
    (note,) = [c.value for c in at.caption if "paper's budget" in c.value]
    assert "about 100 batches of 64" in note and "on this machine" in note


def test_tradeoff_page_rescores_under_the_chosen_discount(app):
    at = open_page(app, "app_pages/5_Trade-off.py")
    box = at.selectbox(key="tradeoff_discount")
    assert box.options == ["linear", "none"] and box.value == "linear"

    def reference_point() -> tuple[float, float]:
        assert not at.exception and not at.error
        trace = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
        assert trace["name"] == "reference"
        return trace["x"][0], trace["y"][0]

    linear = reference_point()
    box.set_value("none").run()
    none = reference_point()
    assert none[1] != pytest.approx(linear[1])  # P under the other weighting, not the memo's linear point


def test_model_card_says_when_p_and_s_are_not_rank_discounted():
    from core.training.card import contrastlab_card_section
    from core.training.config import TrainConfig

    scores = {"k": 16, "polarity": 60.0, "similarity": 40.0}
    cfg = TrainConfig(corpus="x.csv")
    assert "| metric (k = 16) |" in contrastlab_card_section(cfg, {"after": {**scores, "discount": "linear"}})
    uniform = TrainConfig(corpus="x.csv", discount="none")
    assert "| metric (k = 16, no rank discount) |" in contrastlab_card_section(
        uniform, {"after": {**scores, "discount": "none"}})
