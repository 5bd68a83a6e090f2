"""Choosing among arms on held-out training rows, never on test (issue 53): mgh's curriculum is compared with the
best fixed band, chosen on a tenth of TREC's training questions that no arm trains on; fixed:2 and fixed:3 run at
--quick too (the paper: they did better than 1 and 4), all four at full size."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import core.jobs.launch
import core.jobs.worker
from core.cli import main
from core.reproduce import mgh
from core.reproduce.experiment import Outcome, Setup
from core.reproduce.validation import views
from core.runs.store import RunStore
from tests.test_reproduce_generated import _trec


def test_the_views_hold_out_a_tenth_of_each_labels_training_rows_and_keep_test(tmp_path):
    source = _trec(tmp_path) / "trec.csv"
    training, held = views(source, 0.1, tmp_path / "views")
    original, train_view, held_view = (pd.read_csv(p) for p in (source, training, held))
    assert training.name == "trec.csv" and len(train_view) == len(original)
    moved = train_view[train_view["split"] != original["split"]]
    assert set(moved["split"]) == {"validation"} and set(original.loc[moved.index, "split"]) == {"train"}
    per_label = original.query("split == 'train'").groupby("label").size()
    assert moved.groupby("label").size().to_dict() == (per_label * 0.1).round().astype(int).to_dict()
    assert train_view.query("split == 'test'").equals(original.query("split == 'test'"))  # test rows untouched
    assert "test" not in set(held_view["split"]) and len(held_view) == (original["split"] != "test").sum()
    again, _ = views(source, 0.1, tmp_path / "again")
    assert pd.read_csv(again).equals(train_view)  # seeded: the same rows every time


def _outcome(test: float, validation: float | None) -> Outcome:
    metrics = {"knn_accuracy": test, "knn_accuracy_ci": [test - 0.02, test + 0.02]}
    return Outcome("r", {}, metrics, metrics, validation={} if validation is None else {"knn_accuracy": validation})


def test_the_best_fixed_band_is_the_one_best_on_validation_not_on_test():
    outcomes = {"order curriculum": _outcome(0.8, None), "order random": _outcome(0.7, None),
                "order reverse": _outcome(0.6, None),
                "order fixed:2": _outcome(0.9, 0.70),  # best on test, not on validation
                "order fixed:3": _outcome(0.75, 0.74)}
    rows = mgh.rows(outcomes, Setup(True, "m"))
    claims = [r.claim for r in rows if r.kind == "difference"]
    assert claims == ["kNN accuracy (pp): curriculum - random", "kNN accuracy (pp): curriculum - reverse",
                      "kNN accuracy (pp): curriculum - the best fixed band"]
    chosen = rows[-1]
    assert "the best of fixed:2, fixed:3 on validation" in chosen.differs and "fixed:3, 74.0%" in chosen.differs
    assert "validation kNN accuracy 70.0%" in rows[4].differs  # each fixed arm's own figure row says it
    assert all("less the tenth held out for validation" in r.differs for r in rows)  # the kNN pool, before too
    assert [a.label for a in mgh.arms(Path("/d"), Setup(True, "m"))][3:] == ["order fixed:2", "order fixed:3"]
    assert [a.label for a in mgh.arms(Path("/d"), Setup(False, "m"))][3:] == [
        "order fixed:2", "order fixed:3", "order fixed:1", "order fixed:4"]


def test_a_quick_mgh_reproduction_chooses_on_held_out_questions(tmp_path, tiny_model_dir, contrastlab_home,
                                                                 monkeypatch, capsys):
    monkeypatch.setattr(core.jobs.launch, "start",
                        lambda store, run_id, meet=None: core.jobs.worker.execute(store, run_id) or os.getpid())
    monkeypatch.setattr(mgh, "_steps", lambda quick: 2)
    data = _trec(tmp_path)
    assert main(["reproduce", "mgh", "--quick", "--data", str(data), "--model", str(tiny_model_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    store = RunStore()
    folder = store.run_dir(out["run_id"]) / "validation"
    children = store.list(kind="train", with_losses=False)
    assert len(children) == 5 and {c.config["corpus"] for c in children} == {str(folder / "trec.csv")}
    best = out["rows"][-1]
    assert best["claim"] == "kNN accuracy (pp): curriculum - the best fixed band" and best["p_value"] is not None
    assert "on validation (a tenth of the training questions, held out from every arm)" in best["differs"]
    assert all("validation kNN accuracy" in r["differs"] for r in out["rows"] if "band order fixed" in r["claim"])
