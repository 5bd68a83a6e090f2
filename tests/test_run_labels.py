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


def test_a_run_alone_is_named_by_its_settings_off_their_defaults(tmp_path):
    """Issue 31, item 3.4: two RAOE runs that differ only in their teacher read apart in the run panel's header, the
    export folder's name and the STS chart's rows, not both 'raoe · rank margin I 2'."""
    from core.analysis.plots import sts_change_figure
    from core.runs.export import EXPORT_NAME_CHARS, export_name
    from core.runs.labels import own_settings_text
    from core.runs.store import RunStore

    store = RunStore(tmp_path)
    ids = [store.create("train", {"recipe": "raoe", "corpus": "x.csv", "interval": 2, "teacher": teacher})
           for teacher in ("score", "reference", "/models/all-mpnet-base-v2")]
    runs = [store.get(i) for i in ids]
    assert [own_settings_text(r) for r in runs] == ["teacher score", "", "teacher all-mpnet-base-v2"]
    names = [export_name(r) for r in runs]
    assert names[0] == f"contrastlab-raoe-I2-teacher_score-{ids[0]}" and names[1] == f"contrastlab-raoe-I2-{ids[1]}"
    long = store.get(store.create("train", {"recipe": "raoe", "corpus": "x.csv", "teacher": "t" * 300}))
    assert export_name(long).endswith(long.id) and len(export_name(long)) <= EXPORT_NAME_CHARS
    rows = [{"run_id": i, "name": f"raoe · teacher {t} · {i}", "before": 80.0, "after": 81.0, "change": 1.0}
            for i, t in zip(ids, ("score", "reference", "mpnet"))]
    assert list(sts_change_figure(rows).data[-1].y) == [r["name"] for r in rows]


def test_the_run_panel_header_names_the_settings_that_tell_the_run_apart(app):
    from core.runs.store import RunStore

    store = RunStore()
    run_id = store.create("train", {"recipe": "raoe", "corpus": "x.csv", "interval": 2, "teacher": "score"})
    store.claim(run_id, 0)
    store.mark_failed(run_id, "boom")
    app.query_params["run"] = run_id
    app.run()
    at = app.switch_page("app_pages/7_Runs.py").run()
    assert any("recipe **raoe**" in m.value and "**teacher score**" in m.value for m in at.markdown)


def test_runs_on_two_uploads_are_told_apart_by_the_names_the_user_gave_them(tmp_path, tiny_model_dir):
    """Issue 31, section 1: the label named the app's copy ('corpus 2fd16bf5dc741aaf.parquet')."""
    import pandas as pd

    from core.data.content import persist_table

    store = RunStore()
    frames = [pd.read_csv(_pairs_file(tmp_path)), pd.read_csv(_pairs_file(tmp_path)).head(30)]
    ids = [store.create("train", {"corpus": str(persist_table(df, df.columns)), "model": str(tiny_model_dir),
                                  "recipe": "cosent"}, corpus_name=name)
           for df, name in zip(frames, ("sts-full.csv", "sts-head.csv"))]
    differ = differences([store.get(i) for i in ids])
    assert [differ[i] for i in ids] == ["corpus sts-full.csv", "corpus sts-head.csv"]


def test_runs_names_each_run_s_knob_by_its_recipe_s_name_for_it(contrastlab_home, capsys):
    """Issue 51: `runs` showed a listmle run's w under the name "margin"."""
    import json

    from core.cli import main
    from core.runs.store import RunStore

    store = RunStore()
    store.create("train", {"recipe": "listmle", "w": 0.7, "corpus": "c.csv"})
    store.create("train", {"recipe": "cosent", "margin": 20.0, "corpus": "c.csv"})
    assert main(["runs", "--json"]) == 0
    runs = {r["recipe"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert (runs["listmle"]["knob"], runs["listmle"]["knob_value"]) == ("nudge weight w", 0.7)
    assert (runs["cosent"]["knob"], runs["cosent"]["knob_value"]) == ("scale", 20.0)
    assert "margin" not in runs["listmle"]
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "nudge weight w 0.7" in out and "scale 20.0" in out and "margin" not in out


def test_an_export_folder_names_the_knob_by_its_own_letter():
    """Issue 51: a CoSENT run's export folder read 'cosent-m20.0', its scale shown as a margin."""
    from core.runs.export import export_name
    from core.runs.store import RunStore

    store = RunStore()
    settings = (("cosent", {"margin": 20.0}), ("triplet", {"margin": 0.1}), ("listmle", {"w": 0.7}))
    named = {recipe: export_name(store.get(store.create("train", {"recipe": recipe, **setting})))
             for recipe, setting in settings}
    assert named["cosent"].startswith("contrastlab-cosent-s20.0-")
    assert named["triplet"].startswith("contrastlab-triplet-m0.1-")
    assert named["listmle"].startswith("contrastlab-listmle-w0.7-")


def test_a_run_is_never_named_by_the_settings_it_leaves_empty(contrastlab_home):
    """Issue 51: labels stuffed with "label col – · text1 col – …" made the compare selectors and the Trade-off STS
    chart unreadable: a run on labelled texts beside one on pairs was named by the other's empty columns."""
    from core.runs.labels import run_labels
    from core.runs.store import RunStore

    store = RunStore()
    labelled = store.create("train", {"recipe": "cosent", "corpus": "a.csv", "text_col": "text", "label_col": "label"})
    pairs = store.create("train", {"recipe": "cosent", "corpus": "b.csv", "text1_col": "s1", "text2_col": "s2",
                                   "score_col": "gold"})
    labels = run_labels([store.get(labelled), store.get(pairs)])
    assert "–" not in labels[labelled] and "–" not in labels[pairs], labels
    assert "text1 col s1" in labels[pairs] and "label col label" in labels[labelled]
