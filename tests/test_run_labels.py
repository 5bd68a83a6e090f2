"""Labels that tell runs apart (issue 25): a run's label names every setting in which it differs from the other runs
of its recipe shown with it, wherever runs are listed or picked."""

from __future__ import annotations

from core.runs.labels import differences, run_labels
from core.runs.store import RunStore


def _pairs_file(tmp_path):
    path = tmp_path / "pairs.csv"
    rows = [f"sentence {i} a,sentence {i} b,{i % 5}" for i in range(40)]
    path.write_text("text1,text2,score\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def test_two_raoe_runs_differing_only_in_the_teacher_are_named_by_it(tmp_path, tiny_model_dir):
    store = RunStore()
    base = {"corpus": _pairs_file(tmp_path), "model": str(tiny_model_dir), "recipe": "raoe"}
    gold = store.create("train", {**base, "teacher": "score"})
    ref = store.create("train", {**base, "teacher": "reference"})
    labels = run_labels([store.get(gold), store.get(ref)])
    assert "raoe" in labels[gold] and "teacher score" in labels[gold] and gold in labels[gold]
    assert "teacher reference" in labels[ref]
    assert labels[gold] != labels[ref]
    # alone, or beside a run of another recipe, a run's label names no setting
    alone = run_labels([store.get(gold)])[gold]
    assert "teacher" not in alone
    cosent = store.create("train", {**base, "recipe": "cosent"})
    assert "teacher" not in run_labels([store.get(gold), store.get(cosent)])[gold]


def test_defaults_and_where_a_run_ran_are_not_differences(tmp_path, tiny_model_dir):
    store = RunStore()
    base = {"corpus": _pairs_file(tmp_path), "model": str(tiny_model_dir), "recipe": "cosent"}
    implicit = store.create("train", base)
    explicit = store.create("train", {**base, "lr": 3e-5, "device": "cpu"})  # lr at its default, device elsewhere
    seeded = store.create("train", {**base, "seed": 3})
    differ = differences([store.get(i) for i in (implicit, explicit, seeded)])
    assert differ[implicit] == differ[explicit] == "seed 0" and differ[seeded] == "seed 3"


def test_a_knob_keeps_the_case_of_its_symbols_in_labels(tmp_path, tiny_model_dir):
    """RAOE's knob read 'rank margin i 2' (the whole label lowered); only a capitalised first word is lowered."""
    from core.runs.labels import knob_text
    from core.training.recipes import RECIPES

    store = RunStore()
    run = store.get(store.create("train", {"corpus": _pairs_file(tmp_path), "model": str(tiny_model_dir),
                                           "recipe": "raoe", "interval": 4}))
    assert knob_text(run) == "rank margin I 4"
    assert RECIPES["raoe"].param("w_rank").phrase == "weight of L_rank"
    assert RECIPES["triplet"].knob_param.phrase == "margin"
