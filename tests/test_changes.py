"""The texts that got worse (issue 25): flipped kNN predictions with their neighbours, pairs by the growth of their
rank error, lists that lost their order; on the Runs page with a CSV, and as a Maps colouring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.analysis.maps import FLIP, FLIP_COLOURS, TRAINING, MapData, map_figures
from core.data.corpus import demo_corpus_path, load_corpus
from core.evaluation.changes import BETTER, KEPT_RIGHT, KEPT_WRONG, WORSE, changed_items, flip_status, rank_error
from core.runs.store import RunStore
from core.training.config import TrainConfig
from core.training.trainer import load_run_corpus
from tests.conftest import no_errors, tiny_runs_home


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory, tiny_model_dir) -> tuple[str, str]:
    """(home, run id) of one run trained hard enough (lr 1e-3) to flip some kNN votes, for the module's tests."""
    home, (run_id,) = tiny_runs_home(tmp_path_factory, tiny_model_dir, {"lr": 1e-3})
    return str(home), run_id


@pytest.fixture
def run_id(tuned_run, monkeypatch) -> str:
    home, run = tuned_run
    monkeypatch.setenv("CONTRASTLAB_HOME", home)
    return run


def test_flip_status_names_each_outcome():
    before = np.array([True, True, False, False])
    after = np.array([False, True, True, False])
    assert flip_status(before, after).tolist() == [WORSE, KEPT_RIGHT, BETTER, KEPT_WRONG]


def test_rank_error_is_zero_where_cosine_and_gold_agree_and_grows_with_the_swap():
    gold = np.array([0.0, 1.0, 2.0, 3.0])
    assert rank_error(np.array([0.1, 0.2, 0.3, 0.4]), gold).tolist() == [0, 0, 0, 0]
    assert rank_error(np.array([0.4, 0.2, 0.3, 0.1]), gold).tolist() == [0.75, 0, 0, 0.75]


def test_a_real_run_lists_its_flipped_texts_with_neighbours(run_id):
    run = RunStore().get(run_id)
    corpus = load_run_corpus(TrainConfig.from_dict(run.config))
    frame = changed_items(run.before, run.metrics_after, corpus)
    assert list(frame.columns) == ["change", "text", "label", "predicted before", "predicted after",
                                   "neighbours before", "neighbours after"]
    assert set(frame["change"]) <= {WORSE, BETTER}
    worse = frame[frame["change"] == WORSE]
    assert (worse["label"] == worse["predicted before"]).all() and (worse["label"] != worse["predicted after"]).all()
    assert frame["change"].tolist() == sorted(frame["change"], key=[WORSE, BETTER].index)  # right -> wrong first
    assert all(t in corpus.test_texts for t in frame["text"])
    assert all(len(n.split(" | ")) == 3 and all(x in corpus.train_texts for x in n.split(" | "))
               for n in frame["neighbours after"])
    accuracy = (run.metrics_after["knn_accuracy"] - run.before["knn_accuracy"]) * len(corpus.test_texts)
    assert accuracy == pytest.approx((frame["change"] == BETTER).sum() - (frame["change"] == WORSE).sum())
    other = load_corpus(demo_corpus_path(), drop_leaked=False)
    assert changed_items({}, run.metrics_after, other) is None  # no arrays: nothing to list, no error


def test_pairs_are_listed_by_how_much_their_rank_error_grew(contrastlab_home, tiny_model_dir, tmp_path):
    from core.data.pairs import load_pairs
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.models.loading import load_model

    rows = [{"text1": f"the cat number {i} sat", "text2": f"a dog {i % 7} ran far", "score": float(i % 5),
             "split": "test" if i < 30 else "train"} for i in range(60)]
    path = tmp_path / "pairs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    pairs = load_pairs(path)
    model = load_model(str(tiny_model_dir), "cpu")
    before = evaluate_corpus(model, model, pairs)
    import torch

    torch.manual_seed(0)
    for p in model.parameters():  # another model on the same pairs
        p.data.add_(0.05 * torch.randn_like(p))
    after = evaluate_corpus(model, model, pairs)
    frame = changed_items(before, after, pairs)
    assert len(frame) == 30 and frame["change"].is_monotonic_decreasing
    assert frame["change"].tolist() == pytest.approx((frame["rank error after"] - frame["rank error before"]).tolist())


def test_runs_page_lists_what_got_worse_with_a_csv(run_id, app):
    app.query_params["run"] = run_id
    app.run()
    at = app.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
    expander = next(e for e in at.expander if e.label == "What got worse (and better)")
    assert any("right → wrong" in m.value for m in expander.markdown)
    assert any(b.label == "Download as CSV" for b in at.get("download_button"))


def test_maps_colour_test_texts_by_their_knn_flip():
    n = 6
    data = MapData(method="tsne", texts=[f"t{i}" for i in range(n)], labels=["a", "b"] * 3, split=["train"] * 2 +
                   ["test"] * 4, n_available=n, reference=np.eye(n), ref_map=np.random.default_rng(0).random((n, 2)),
                   ref_knn=0.5, ref_right=np.array([None, None, True, True, False, False], dtype=object),
                   tuned_right=np.array([None, None, False, True, True, False], dtype=object), tuned=np.eye(n),
                   tuned_map=np.random.default_rng(1).random((n, 2)), tuned_knn=0.5, n_test=4)
    assert data.flips == [TRAINING, TRAINING, WORSE, KEPT_RIGHT, BETTER, KEPT_WRONG]
    ref, tuned = map_figures(data, "reference", "tuned", colour=FLIP)
    assert {t.name for t in tuned.data if t.name} >= {WORSE, BETTER, TRAINING}
    colours = {t.name: t.marker.color for t in ref.data if t.name}
    assert colours[WORSE] == FLIP_COLOURS[WORSE] and colours[BETTER] == FLIP_COLOURS[BETTER]  # red worse, green better
    assert ref.data[0].name == TRAINING  # drawn first, under the voted texts


def test_lists_that_lost_their_order_come_first_then_those_that_gained_it():
    from types import SimpleNamespace

    from core.evaluation.changes import list_changes

    lists = SimpleNamespace(test=SimpleNamespace(lists=[["a0", "a1", "a2"], ["b0", "b1", "b2"], ["c0", "c1", "c2"],
                                                        ["d0", "d1", "d2"]]))
    before = {"list_exact": np.array([1.0, 0.0, 1.0, 0.0]), "list_tau": np.array([1.0, 0.0, 1.0, 0.5])}
    after = {"list_exact": np.array([1.0, 1.0, 0.0, 0.0]), "list_tau": np.array([1.0, 1.0, 0.2, -0.5])}
    frame = list_changes(before, after, lists)
    assert frame["anchor"].tolist() == ["c0", "b0", "d0", "a0"]  # lost, gained, then by tau's fall
    assert frame["change"].tolist() == ["lost its order", "gained its order", "", ""]
    assert frame["members"][0] == "c1 | c2" and frame["tau change"].tolist() == pytest.approx([-0.8, 1.0, -1.0, 0.0])
