"""Seeds and labelled points on the Trade-off plot: a sweep's seeds grid and its hostile values (core, CLI, Train
page), runs that differ only in seed drawn as one point with the right mean and spread, every point labelled with
its recipe and knob (quick points marked), budgets told apart, and the error-bar choice."""

from __future__ import annotations

import json
import math
import os

import pytest
from streamlit.testing.v1 import AppTest

import core.jobs.launch
from core import cli
from core.analysis.plots import tradeoff_figure
from core.analysis.tradeoff import (
    approximate_ci,
    budget_text,
    point_label,
    seed_groups,
    tradeoff_points,
    triplet_count_note,
)
from core.data.corpus import demo_corpus_path, load_corpus
from core.errors import UserError
from core.evaluation.uncertainty import interval
from core.jobs.quick import QUICK_BUDGET
from core.jobs.sweep import MAX_SEEDS, grid, sweep_config
from core.runs.store import RunStore
from tests.conftest import APP, APP_TIMEOUT_S, button, no_errors


@pytest.fixture
def base(tiny_model_dir) -> dict:
    return {"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir), "recipe": "triplet", "examples": 32}


# --- the seeds grid ----------------------------------------------------------------------------------------------


def test_seeds_train_every_point_with_consecutive_seeds(base):
    config = sweep_config({**base, "seed": 5}, ["triplet"], [0.1, 1.0], seeds=3)
    points = grid(config)
    assert config["seeds"] == 3
    assert [(p["margin"], p["seed"]) for p in points] == [(0.1, 5), (0.1, 6), (0.1, 7), (1.0, 5), (1.0, 6), (1.0, 7)]
    same = [{k: v for k, v in p.items() if k != "seed"} for p in points[:3]]
    assert same[0] == same[1] == same[2]  # nothing but the seed differs
    assert [p["seed"] for p in grid(sweep_config(base, ["triplet"], [0.1], "2"))] == [0, 1]  # a flag's text


def test_a_sweep_saved_before_seeds_trains_once_per_point(base):
    assert [p["seed"] for p in grid({"base": base, "recipes": ["triplet"], "margins": [0.1, 1.0]})] == [0, 0]


@pytest.mark.parametrize("seeds", [0, -1, MAX_SEEDS + 1, 10**12, 2.5, "abc", "", None, True, math.nan, math.inf,
                                   "1e400", [2]])
def test_hostile_seeds_are_one_clear_message(base, seeds):
    with pytest.raises(UserError) as info:
        sweep_config(base, ["triplet"], [0.1], seeds)
    message = str(info.value)
    assert message.startswith(f"seeds must be a whole number in [1, {MAX_SEEDS}], got") and "\n" not in message


def test_seeds_past_the_largest_seed_are_refused(base):
    with pytest.raises(UserError, match="pass the largest seed"):
        sweep_config({**base, "seed": 2**31 - 2}, ["triplet"], [0.1], seeds=3)
    assert len(grid(sweep_config({**base, "seed": 2**31 - 3}, ["triplet"], [0.1], seeds=3))) == 3


@pytest.mark.parametrize("seeds", ["0", "-2", "21", "1.5", "many", ""])
def test_cli_sweep_refuses_bad_seeds_with_one_line(seeds, capsys):
    assert cli.main(["sweep", str(demo_corpus_path()), "--margins", "0.1", "--seeds", seeds]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: seeds must be a whole number") and len(err.strip().splitlines()) == 1


def test_train_page_sweep_form_starts_a_sweep_with_seeds(monkeypatch, tiny_model_dir):
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    monkeypatch.setattr(core.jobs.launch, "start", lambda store, run_id: os.getpid())  # stays queued
    at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S).run()
    at = at.switch_page("app_pages/2_Train.py").run()
    no_errors(at)
    seeds = at.number_input(key="train:sweep:seeds")
    assert (seeds.value, seeds.min, seeds.max) == (1, 1, MAX_SEEDS)
    at.text_input(key="train:sweep:triplet").set_value("0.1, 1").run()
    seeds.set_value(3).run()
    button(at, "Start sweep").click().run()
    no_errors(at)
    [sweep] = RunStore().list(kind="sweep")
    assert sweep.config["seeds"] == 3 and len(grid(sweep.config)) == 6


# --- points: grouped by seed, labelled ---------------------------------------------------------------------------


def _uncertainty(p: float, s: float) -> dict:
    return {"level": 0.95, "resamples": 1000, "polarity_se": 1.0, "polarity_ci": [p - 2.0, p + 2.5],
            "similarity_se": 0.5, "similarity_ci": [s - 1.0, s + 1.0]}


def fake_run(store: RunStore, config: dict, fingerprint: str, model_dir, p: float, s: float,
             kept: bool = True) -> str:
    """A finished run with these scores (no training): what tradeoff_points reads of a run."""
    run_id = store.create("train", config)
    store.mark_running(run_id, os.getpid())
    store.set_progress(run_id, summary={"corpus": {"fingerprint": fingerprint}})
    metrics = {"polarity": p, "polarity_sd": 20.0, "similarity": s, "similarity_sd": 7.0, "k": 16, "n_queries": 83,
               "n_pool": 415, **({"uncertainty": _uncertainty(p, s)} if kept else {})}
    store.mark_done(run_id, metrics, {"model": str(model_dir)})
    return run_id


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(demo_corpus_path())


@pytest.fixture
def points(tiny_model, tiny_model_dir, corpus, tmp_path, base) -> list[dict]:
    """The reference, three seeds of one config, one run at another margin stored before intervals were kept, and
    a quick run (another budget), as tradeoff_points gives them."""
    store = RunStore(tmp_path)
    config = {**base, "reference": str(tiny_model_dir), "margin": 0.1}
    ids = [fake_run(store, {**config, "seed": seed}, corpus.fingerprint, tiny_model_dir, p, s)
           for seed, p, s in ((0, 80.0, 40.0), (1, 82.0, 38.0), (2, 84.0, 39.0))]
    ids.append(fake_run(store, {**config, "margin": 1.0}, corpus.fingerprint, tiny_model_dir, 70.0, 30.0,
                        kept=False))
    ids.append(fake_run(store, {**config, **QUICK_BUDGET, "margin": 0.5}, corpus.fingerprint, tiny_model_dir,
                        60.0, 45.0))
    found = tradeoff_points(store, corpus, tiny_model, k=16)
    assert [p["run_id"] for p in found] == [None, *ids]
    return found


def test_runs_differing_only_in_seed_are_one_point_with_mean_and_spread(points):
    ref, *seeds, other, quick = points
    assert len({p["group"] for p in seeds}) == 1 and other["group"] != seeds[0]["group"] != quick["group"]
    shown = seed_groups(points)
    assert [p.get("n_seeds", 1) for p in shown] == [1, 3, 1, 1]
    merged = shown[1]
    assert merged["polarity"] == pytest.approx(82.0) and merged["similarity"] == pytest.approx(39.0)
    assert merged["seed_range"] == {"polarity": (80.0, 84.0), "similarity": (38.0, 40.0)}
    assert merged["seed_sd"]["polarity"] == pytest.approx(2.0) and merged["seed_sd"]["similarity"] == pytest.approx(1.0)
    assert merged["seeds"] == [0, 1, 2] and merged["run_ids"] == [p["run_id"] for p in seeds]
    assert merged["label"] == "triplet m0.1 · 3 seeds" and shown[0] is ref and shown[2] is other
    assert seed_groups([ref]) == [ref] and seed_groups([]) == []


def test_every_point_is_labelled_and_budgets_differ(points):
    ref, first, _, _, other, quick = points
    assert [p["label"] for p in (ref, first, other, quick)] == ["reference", "triplet m0.1", "triplet m1",
                                                                "triplet m0.5 (quick)"]
    assert first["budget"] == "32 examples × 1 epoch" and quick["budget"] == "256 examples × 1 epoch"
    assert point_label({**QUICK_BUDGET, "recipe": "triplet", "margin": 0.5, "top_layers": 2}) == \
        "triplet m0.5 (top-2 quick)"
    assert point_label({"recipe": "mgh"}) == "mgh s20"  # a recipe's default knob, named by its first letter
    assert point_label({"recipe": "cosine"}) == "cosine"  # no knob
    assert budget_text({"examples": 2000, "epochs": 2.5, "max_steps": 100}) == \
        "2,000 examples × 2.5 epochs · ≤ 100 steps"


def test_the_margin_slider_says_why_it_counts_fewer_triplets_than_the_train_page():
    many = triplet_count_note(5021, 2000)
    assert many.startswith("Why 2,000:") and "Mining finds 5,021" in many and "2,000 by default" in many
    assert "trains on 256 of them" in many
    few = triplet_count_note(217, 217)
    assert few.startswith("Why 217: that is every triplet mining finds") and "on 217." in few


def test_figure_labels_points_marks_budgets_and_seeds_and_draws_the_chosen_bars(points):
    shown = seed_groups(points)
    fig = tradeoff_figure(shown, 16, "ci")
    traces = {t.name: t for t in fig.data}
    assert list(traces) == ["reference", "triplet · 32 examples × 1 epoch · mean of seeds (bars: min–max)",
                            "triplet · 32 examples × 1 epoch", "triplet · 256 examples × 1 epoch", "Pareto front"]
    seeded, single, quick = (traces[n] for n in list(traces)[1:4])
    assert [t.text for t in fig.data[:4]] == [("reference",), ("triplet m0.1 · 3 seeds",), ("triplet m1",),
                                              ("triplet m0.5 (quick)",)]
    assert all(t.mode == "markers+text" for t in fig.data[:4])
    assert single.marker.symbol != quick.marker.symbol and single.marker.color == quick.marker.color
    assert fig.data[0].marker.symbol == "star"
    # the seeds' min–max, thicker than a run's own bars, and the hover says so with n
    assert (seeded.error_y.arrayminus[0], seeded.error_y.array[0]) == pytest.approx((2.0, 2.0))
    assert seeded.error_y.thickness > single.error_y.thickness
    assert "mean of 3 runs, seeds 0, 1, 2" in seeded.customdata[0][7] and "min–max" in seeded.customdata[0][5]
    # a run's stored bootstrap CI, asymmetric; an old run's normal approximation, marked
    assert (quick.error_y.arrayminus[0], quick.error_y.array[0]) == pytest.approx((2.0, 2.5))
    assert "95% CI 58.0–62.5" in quick.customdata[0][5]
    old = shown[2]
    assert interval(old, "polarity", "ci").approximate and "normal approx." in single.customdata[0][5]
    assert approximate_ci(shown) == [old["run_id"]]  # not the reference, the seeds' mean or the quick run
    assert "95% CI of the mean (bootstrap)" in fig.layout.title.text
    sd = tradeoff_figure(shown, 16, "sd")
    assert list(sd.data[3].error_y.array) == [20.0] and "standard deviation over targets" in sd.layout.title.text
    se = tradeoff_figure(shown, 16, "se")
    assert list(se.data[3].error_y.array) == [1.0]  # as stored
    assert list(se.data[2].error_y.array) == pytest.approx([20.0 / math.sqrt(82)])  # old run: sd / sqrt(n - 1)
    assert list(sd.data[1].error_y.array) == list(seeded.error_y.array)  # seed bars whatever the choice


def _labelled(*spots: tuple[str, float, float]) -> list[dict]:
    return [{"name": n, "label": n, "polarity": p, "similarity": s, "polarity_sd": 1.0, "similarity_sd": 1.0}
            for n, p, s in spots]


def test_crowded_labels_are_pushed_apart_and_kept_inside_the_plot():
    a, b, far = tradeoff_figure(_labelled(("a", 80.0, 40.0), ("b", 80.5, 40.2), ("far", 20.0, 10.0)),
                                bars="sd").data[0].textposition
    assert a != b and far == "top right"  # the preferred place, where nothing is in the way
    same = tradeoff_figure(_labelled(("one", 50.0, 30.0), ("two", 50.0, 30.0), ("three", 50.0, 30.0),
                                     ("elsewhere", 10.0, 5.0)), bars="sd").data[0].textposition
    assert len(set(same[:3])) == 3  # coincident points (an untrained-looking run): three places
    edge = tradeoff_figure(_labelled(("left", 10.0, 5.0), ("a long label at the right edge", 50.0, 30.0)),
                           bars="sd").data[0].textposition
    assert edge[1].endswith("left")  # drawn to the right it would leave the plot


def test_trade_off_page_marks_an_old_runs_approximate_ci_and_switches_bars(monkeypatch, tiny_model_dir, base, corpus):
    """Through AppTest: an old run (no stored intervals) and three seeds of another configuration; the page says
    which run's CI is approximate, draws the seeds as one labelled point, and redraws with the chosen bars."""
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    store = RunStore()
    config = {**base, "reference": str(tiny_model_dir), "margin": 0.1}
    old = fake_run(store, {**config, "margin": 1.0}, corpus.fingerprint, tiny_model_dir, 70.0, 30.0, kept=False)
    for seed in range(3):
        fake_run(store, {**config, "seed": seed}, corpus.fingerprint, tiny_model_dir, 80.0 + seed, 40.0)
    at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S).run()
    at = at.switch_page("app_pages/5_Trade-off.py").run()
    no_errors(at)
    plot = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["text"] for t in plot["data"][:3]] == [["reference"], ["triplet m1"], ["triplet m0.1 · 3 seeds"]]
    assert "95% CI of the mean (bootstrap)" in plot["layout"]["title"]["text"]
    assert any(f"`{old}` was evaluated before ContrastLab kept the bootstrap interval" in c.value for c in at.caption)
    assert any("its bars the seeds' lowest and highest scores" in c.value for c in at.caption)

    at.get("button_group")[0].set_value("sd").run()
    no_errors(at)
    plot = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "standard deviation over targets" in plot["layout"]["title"]["text"]
    assert plot["data"][1]["error_y"]["array"] == [20.0]
    assert not any("was evaluated before" in c.value for c in at.caption)  # sd needs no interval
