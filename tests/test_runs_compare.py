"""The Runs & export page's comparison, stored settings, notes / tags / filters and the projector export: the
comparison table fills A and B before and after, a quick run and a page run of one model differ in no reference,
notes and tags round-trip (and reach a database made before they existed), filters narrow the table and pickers,
and the TSV pair keeps its rows aligned whatever the texts hold."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import core.jobs.sweep
import core.jobs.worker
from core.data.corpus import demo_corpus_path
from core.errors import UserError
from core.jobs.quick import find_quick, quick_config
from core.jobs.sweep import grid
from core.runs.export import export_run, write_projector
from core.runs.labels import corpus_names, select_runs
from core.runs.store import NOTE_MAX, TAG_MAX, TAGS_MAX, RunStore, clean_tags
from core.storage import corpora_dir
from core.training.config import TrainConfig, resolved
from tests.conftest import button, no_errors
from ui.run_tables import DIFF, PAIRED, comparison, comparison_frame, comparison_table, config_diff

RUNS_PAGE = "app_pages/7_Runs.py"
BEFORE = {"polarity": 60.0, "similarity": 45.0, "knn_accuracy": 0.70, "linear_accuracy": 0.72}


def page_config(model_dir: Path, **settings) -> dict:
    """A config as the Train page stores it (reference set to the model)."""
    return TrainConfig(corpus=str(demo_corpus_path()), model=str(model_dir), reference=str(model_dir),
                       **settings).to_dict()


def finished(store: RunStore, config: dict, after: dict, corpus_name: str | None = None, losses=()) -> str:
    """A done run with stored metrics and losses, made without training (the page only reads them)."""
    run_id = store.create("train", config, corpus_name=corpus_name)
    store.set_metrics_before(run_id, BEFORE)
    store.add_losses(run_id, list(losses))
    store.mark_done(run_id, metrics_after=after)
    return run_id


def open_runs(app, run_id: str | None = None):
    if run_id is not None:
        app.query_params["run"] = run_id
    app.run()
    return app.switch_page(RUNS_PAGE).run()


# --- comparison ------------------------------------------------------------------------------------------------

def test_comparison_fills_a_and_b_before_and_after_with_pp_for_accuracy_changes(tiny_model_dir):
    store = RunStore()
    a = finished(store, page_config(tiny_model_dir), {"polarity": 70.0, "similarity": 40.0, "knn_accuracy": 0.80,
                                                     "linear_accuracy": 0.75})
    b = finished(store, page_config(tiny_model_dir, margin=1.0), {"polarity": 65.0, "similarity": 43.0,
                                                                 "knn_accuracy": 0.75, "linear_accuracy": 0.74})
    frame = comparison_frame(store.get(a), store.get(b))
    assert list(frame.columns) == ["A before", "A after", "B before", "B after", DIFF, PAIRED]
    assert list(frame.index) == ["P@k", "S@k", "kNN accuracy", "Linear probe"]  # no empty STS / ordering rows
    assert frame.drop(index="S@k").notna().all().all()
    assert pd.isna(frame.loc["S@k", DIFF])  # results that do not record S@k's judge are not subtracted (issue 51)
    assert frame.loc["kNN accuracy"].tolist()[:5] == pytest.approx([70.0, 80.0, 70.0, 75.0, 5.0])
    assert set(frame[PAIRED]) == {"–"}  # figures without per-item arrays: no paired interval
    shown = comparison_table(frame).to_html()
    assert "+5.0 pp" in shown and "80.0%" in shown and "+5.0%" not in shown  # accuracy changes in points
    assert "+5.0<" in shown  # P@k's change has no unit

    one_sided = comparison_frame(store.get(a), store.get(store.create("train", page_config(tiny_model_dir))))
    assert one_sided["B after"].isna().all() and one_sided[DIFF].isna().all()  # a run without metrics: '–'


def _scored(k: int, **figures) -> dict:
    """An evaluation result that names its items and conditions, as every evaluation now stores them."""
    from core.evaluation.items import CONTENT_VERSION

    return {**figures, "k": k, "discount": "linear", "items": {"ref": f"r{k}", "of": {"texts": "same texts"},
            "conditions": {"k": k, "discount": "linear", "judge": "j", "knn_k": 10, "knn_metric": "euclidean"},
            "content": CONTENT_VERSION}}


def test_the_page_subtracts_only_what_the_cli_compares(tiny_model_dir, capsys):
    """Issue 51: runs evaluated at k = 16 and k = 8 showed "A − B" of P@k -2.8 and S@k -2.4 with no note, while
    `python -m core compare` refused them. One function (core.evaluation.paired.unlike) decides for both."""
    store = RunStore()
    a = finished(store, page_config(tiny_model_dir), _scored(16, polarity=70.0, similarity=40.0, knn_accuracy=0.8))
    b = finished(store, page_config(tiny_model_dir, margin=1.0),
                 _scored(8, polarity=72.8, similarity=42.4, knn_accuracy=0.75))
    frame, notes = comparison(store.get(a), store.get(b))
    assert pd.isna(frame.loc["P@k", DIFF]) and pd.isna(frame.loc["S@k", DIFF])
    assert frame.loc["kNN accuracy", DIFF] == pytest.approx(5.0)  # the same vote (k 10, euclidean): compared
    assert any(n.startswith("P@8 / P@16 not compared: computed with another k (8 vs 16)") for n in notes), notes
    from core.cli import main

    assert main(["compare", b, a, "--json"]) == 0
    assert not any(d["name"] == "polarity" for d in json.loads(capsys.readouterr().out)["metrics"])


def test_quick_run_and_page_run_of_one_model_differ_in_no_reference(tiny_model_dir):
    store = RunStore()
    base = {"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir)}
    quick = finished(store, quick_config(base, 0.5), {"polarity": 61.0})
    page = finished(store, page_config(tiny_model_dir), {"polarity": 62.0})
    old = {k: v for k, v in page_config(tiny_model_dir, margin=0.2).items() if k not in ("reference", "lr")}
    legacy = finished(store, old, {"polarity": 63.0})  # stored before configs were complete
    assert store.get(quick).config["reference"] == str(tiny_model_dir)  # stored resolved
    diff = config_diff(store.get(quick), store.get(page))
    assert "reference" not in set(diff["setting"]) and {"examples", "batch_size"} <= set(diff["setting"])
    assert list(diff.columns) == ["setting", "A", "B"]
    assert config_diff(store.get(page), store.get(legacy))["setting"].tolist() == ["margin"]  # lr default filled
    assert resolved({"corpus": "x.csv", "model": "m", "device": "cuda:99"})["reference"] == "m"  # invalid now


def test_find_quick_still_finds_a_run_stored_without_the_reference(tiny_model_dir):
    store = RunStore()
    config = quick_config({"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir)}, 0.5)
    old = store.create("train", {k: v for k, v in config.items() if k != "reference"})
    store.mark_done(old)
    assert find_quick(store, config) == old
    assert find_quick(store, quick_config({"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir)},
                                          0.7)) is None


def test_sweep_children_store_complete_configs_and_the_corpus_name(tiny_model_dir, monkeypatch):
    store = RunStore()
    base = {"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir), "recipe": "triplet"}
    config = core.jobs.sweep.sweep_config(base, ["triplet", "mnrl"], [0.1, 2.0])
    points = grid(config)
    assert all(p["reference"] == str(tiny_model_dir) and p == TrainConfig.from_dict(p).to_dict() for p in points)
    sweep = store.create("sweep", config, corpus_name="my corpus")
    monkeypatch.setattr(core.jobs.sweep, "execute", lambda store, run_id: None)  # the children stay queued
    core.jobs.sweep.run_job(core.jobs.worker.JobContext(store, store.get(sweep)))
    children = store.list(sweep_id=sweep)
    assert len(children) == 4 and {c.corpus_name for c in children} == {"my corpus"}


def test_runs_page_compares_two_runs_in_a_full_width_table_with_a_log_toggle(app, tiny_model_dir):
    store = RunStore()
    losses = [(step, 1.0 / (step + 1)) for step in range(5)] + [(5, 0.0)]
    base = {"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir)}
    quick = finished(store, quick_config(base, 0.5), {"polarity": 61.0, "knn_accuracy": 0.7}, losses=losses)
    page = finished(store, page_config(tiny_model_dir), {"polarity": 62.0, "knn_accuracy": 0.8}, losses=losses)
    at = open_runs(app, page)
    no_errors(at)
    table = at.table[0].value
    assert list(table.columns) == ["A before", "A after", "B before", "B after", DIFF, PAIRED]
    assert table.loc["kNN accuracy", ["A after", "B after"]].tolist() == pytest.approx([80.0, 70.0])
    assert any("**A** `" in m.value and page in m.value and quick in m.value for m in at.markdown)
    settings = at.dataframe[-1].value
    assert "reference" not in set(settings["setting"]) and list(settings.columns) == ["setting", "A", "B"]

    def yaxis() -> dict:
        chart = next(c for c in at.get("plotly_chart") if "Training loss" in c.proto.spec)
        return json.loads(chart.proto.spec)["layout"].get("yaxis", {})

    assert yaxis().get("type") != "log"
    at.toggle(key="runs:compare:log").set_value(True).run()
    no_errors(at)
    assert yaxis()["type"] == "log"
    assert any("2 loss value(s) of zero or below" in c.value for c in at.caption)


# --- notes and tags --------------------------------------------------------------------------------------------

def test_notes_and_tags_round_trip_and_hostile_input_is_one_clear_message():
    store = RunStore()
    run_id = store.create("train", {"corpus": "x.csv"})
    store.annotate(run_id, note="  first try\nwith\ttabs  ", tags=" Baseline, baseline ,, sst2 ,\u200bsst2, a\tb ")
    run = store.get(run_id)
    assert run.note == "first try\nwith\ttabs" and run.tags == ["Baseline", "sst2", "a b"]
    assert store.list()[0].tags == run.tags
    store.annotate(run_id, tags="")  # empty: no tags; the note stays
    assert store.get(run_id).tags == [] and store.get(run_id).note == run.note
    assert clean_tags(["ｆｕｌｌ width", "x,y", "\x00z"]) == ["full width", "x", "y", "z"]  # NFKC, commas, controls
    assert clean_tags("🙂 happy, 🙂 HAPPY") == ["🙂 happy"]

    for bad, words in [(dict(note="x" * (NOTE_MAX + 1)), f"at most {NOTE_MAX:,} characters"),
                       (dict(note=5), "must be text"), (dict(tags=[1, "a"]), "must be text"),
                       (dict(tags="y" * (TAG_MAX + 1)), f"at most {TAG_MAX}"),
                       (dict(tags=",".join(f"t{i}" for i in range(TAGS_MAX + 1))), f"at most {TAGS_MAX} tags")]:
        with pytest.raises(UserError, match=words) as caught:
            store.annotate(run_id, **bad)
        assert len(str(caught.value).splitlines()) == 1
    assert store.get(run_id).note == run.note  # nothing half-written
    with pytest.raises(UserError, match="No run with id"):
        store.annotate("20990101-000000-000-abcdef", note="gone")


OLD_SCHEMA = """
CREATE TABLE runs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, created REAL NOT NULL,
    started REAL, finished REAL, config TEXT NOT NULL, progress TEXT NOT NULL DEFAULT '{}', metrics_before TEXT,
    metrics_after TEXT, artefacts TEXT NOT NULL DEFAULT '{}', error TEXT, pid INTEGER, sweep_id TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0);
CREATE TABLE losses (run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE, step INTEGER NOT NULL, loss REAL);
CREATE TABLE history (run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE, point TEXT NOT NULL);
"""


def test_a_database_made_before_notes_and_tags_is_migrated_in_place(app, tiny_model_dir):
    db = Path(os.environ["CONTRASTLAB_HOME"]) / "runs.sqlite"
    config = {k: v for k, v in page_config(tiny_model_dir).items() if k != "reference"}  # as quick runs were stored
    con = sqlite3.connect(db)
    con.executescript(OLD_SCHEMA)
    for i, margin in enumerate((0.1, 0.5)):
        con.execute("INSERT INTO runs (id, kind, status, created, config, metrics_before, metrics_after) "
                    "VALUES (?, 'train', 'done', ?, ?, ?, ?)", (f"20250101-00000{i}-000-aaaaaa", float(i),
                                                               json.dumps({**config, "margin": margin}),
                                                               json.dumps(BEFORE), json.dumps({"polarity": 70.0})))
    con.commit()
    con.close()

    store = RunStore()
    old = store.get("20250101-000000-000-aaaaaa")
    assert (old.note, old.tags, old.corpus_name) == ("", [], None)
    store.annotate(old.id, note="kept", tags="legacy")
    RunStore()  # opening it again changes nothing
    assert store.get(old.id).tags == ["legacy"]
    with sqlite3.connect(db) as con:
        assert {"note", "tags", "corpus_name"} <= {r[1] for r in con.execute("PRAGMA table_info(runs)")}

    at = open_runs(app, old.id)
    no_errors(at)
    assert at.table[0].value.loc["P@k"].notna().all()
    assert at.dataframe[-1].value["setting"].tolist() == ["margin"]  # no reference: a missing one is the model


def test_runs_page_edits_note_and_tags_and_filters_by_recipe_corpus_and_tag(app, tiny_model_dir):
    store = RunStore()
    saved = corpora_dir() / "0123456789abcdef.parquet"  # an upload's saved copy: a content hash
    triplet = finished(store, page_config(tiny_model_dir), {"polarity": 70.0}, corpus_name="reviews")
    mnrl = finished(store, {**page_config(tiny_model_dir, recipe="mnrl"), "corpus": str(saved)}, {"polarity": 71.0})
    cosine = finished(store, page_config(tiny_model_dir, recipe="cosine"), {"polarity": 72.0})
    at = open_runs(app, cosine)
    no_errors(at)
    table = at.dataframe[0].value.set_index("run")
    assert table.loc[triplet, "corpus"] == table.loc[cosine, "corpus"] == "reviews"  # one name per file
    assert table.loc[mnrl, "corpus"] == "saved table 01234567"

    at.text_area(key=f"runs:note:{cosine}:0").set_value("x" * (NOTE_MAX + 1))
    button(at, "Save note and tags").click().run()
    assert not at.exception
    assert f"at most {NOTE_MAX:,} characters" in at.error[0].value and store.get(cosine).note == ""
    at.text_area(key=f"runs:note:{cosine}:0").set_value("cosine baseline")
    at.text_input(key=f"runs:tags:{cosine}:0").set_value(" keep,  Keep , best run ,")
    button(at, "Save note and tags").click().run()
    no_errors(at)
    assert (store.get(cosine).note, store.get(cosine).tags) == ("cosine baseline", ["keep", "best run"])
    assert at.text_input(key=f"runs:tags:{cosine}:1").value == "keep, best run"  # shown as stored
    assert at.success[0].value == f"Saved the note and tags of run {cosine}."
    assert list(at.dataframe[0].value.set_index("run").loc[cosine, "tags"]) == ["keep", "best run"]

    at.multiselect(key="runs:filter:tag").set_value(["keep"]).run()
    no_errors(at)
    assert at.dataframe[0].value["run"].tolist() == [cosine]
    assert at.selectbox(key="runs:pick").value == cosine and len(at.selectbox(key="runs:pick").options) == 1
    assert "Compare two runs" not in [s.value for s in at.subheader]  # one run left: nothing to compare
    at.multiselect(key="runs:filter:tag").set_value([]).run()
    at.multiselect(key="runs:filter:recipe").set_value(["triplet", "mnrl"]).run()
    assert set(at.dataframe[0].value["run"]) == {triplet, mnrl}
    picker = at.selectbox(key="runs:a")
    assert len(picker.options) == 2 and all(triplet in o or mnrl in o for o in picker.options)
    at.multiselect(key="runs:filter:corpus").set_value([str(saved)]).run()
    assert at.dataframe[0].value["run"].tolist() == [mnrl]
    at.multiselect(key="runs:filter:recipe").set_value(["cosine"]).run()
    no_errors(at)
    assert at.info[-1].value.startswith("No run matches these filters")


def test_corpus_names_and_filters_without_the_page(tiny_model_dir):
    store = RunStore()
    a = store.create("train", {"corpus": "/data/one/reviews.csv", "recipe": "triplet"})
    b = store.create("train", {"corpus": "/data/two/reviews.csv", "recipe": "mnrl"})
    sweep = store.create("sweep", {"base": {"corpus": "/data/one/reviews.csv"}, "recipes": ["mnrl", "cosine"],
                                   "margins": [1.0]})
    runs = store.list()
    names = corpus_names(runs)
    assert names == {"/data/one/reviews.csv": "reviews (/data/one/reviews.csv)",
                     "/data/two/reviews.csv": "reviews (/data/two/reviews.csv)"}  # two files of one name stay apart
    uploads = [store.create("train", {"corpus": str(corpora_dir() / f"{h * 16}.parquet")}, corpus_name="mine")
               for h in "ab"]
    assert [corpus_names(store.list())[str(corpora_dir() / f"{h * 16}.parquet")] for h in "ab"] == [
        "mine (aaaaaaaa)", "mine (bbbbbbbb)"]
    assert [r.id for r in select_runs(runs, recipes=["mnrl"])] == [sweep, b]  # a sweep matches by any recipe
    assert {r.id for r in select_runs(runs, corpora=["/data/one/reviews.csv"])} == {a, sweep}
    assert select_runs(runs, tags=["none"]) == [] and len(select_runs(runs)) == 3
    store.annotate(uploads[0], tags="x")
    assert [r.id for r in select_runs(store.list(), tags=["x", "y"])] == [uploads[0]]


# --- projector export ------------------------------------------------------------------------------------------

def read_projector_metadata(path: Path) -> list[list[str]]:
    """metadata.tsv as the TensorBoard projector reads it: rows split at newlines, cells at tabs, no quoting."""
    return [line.split("\t") for line in path.read_text(encoding="utf-8").split("\n") if line]


def test_projector_pair_keeps_rows_aligned_whatever_the_texts_hold(tmp_path):
    texts = ["plain", "with\ttab", "with\nnewline\r\nand crlf", 'quote " and \\ backslash', "", "ünï 🙂"]
    frame = pd.DataFrame({"text": texts, "label": ["a", "b\tc", "a", "b", "a", "b"], "split": ["train"] * 6})
    emb = np.random.default_rng(0).normal(size=(6, 5)).astype(np.float32)
    vectors, metadata = write_projector(frame, emb, tmp_path)
    rows = read_projector_metadata(metadata)
    assert rows[0] == ["text", "label", "split"] and len(rows) == 1 + len(texts)
    assert all(len(row) == 3 for row in rows)
    assert rows[2][0] == "with\\ttab" and rows[2][1] == "b\\tc" and rows[3][0] == "with\\nnewline\\r\\nand crlf"
    assert rows[4][0] == 'quote " and \\\\ backslash' and rows[5][0] == "" and rows[6][0] == "ünï 🙂"
    assert not vectors.read_text().startswith("text")  # no header
    back = np.loadtxt(vectors, delimiter="\t")
    assert back.shape == emb.shape and np.allclose(back, emb, rtol=1e-5, atol=1e-6)


def test_export_of_a_finished_run_writes_the_projector_pair(tiny_model_dir, tmp_path):
    store = RunStore()
    run_id = store.create("train", page_config(tiny_model_dir, examples=32, batch_size=16))
    core.jobs.worker.execute(store, run_id)
    result = export_run(store, run_id, tmp_path)
    assert {"embeddings.tsv", "metadata.tsv"} <= set(result["files"])
    folder = Path(result["dir"])
    parquet = pd.read_parquet(folder / "embeddings.parquet")
    rows = read_projector_metadata(folder / "metadata.tsv")
    vectors = np.loadtxt(folder / "embeddings.tsv", delimiter="\t")
    assert rows[0] == ["text", "label", "split"] and len(rows) - 1 == len(parquet) == len(vectors)
    assert [r[1] for r in rows[1:]] == parquet["label"].tolist()
    assert np.allclose(vectors, np.stack(parquet["embedding"]), atol=1e-5)


def test_compare_names_one_corpus_once_and_says_when_corpora_or_losses_differ(tiny_model_dir, app, tmp_path):
    """Issue 51: "Settings that differ" listed one corpus under two paths (one the app's copy); runs on different
    corpora gave rows of dashes with no reason; loss curves of different losses shared one axis without a word."""
    store = RunStore()
    copy = corpora_dir() / "0123456789abcdef.parquet"  # the app's copy of an upload, as a run's config names it
    same = {"fingerprint": "f1", "content_key": "c1"}
    a = finished(store, page_config(tiny_model_dir), {"polarity": 70.0}, corpus_name="demo_corpus.csv",
                 losses=[(1, 0.5)])
    b = finished(store, {**page_config(tiny_model_dir), "corpus": str(copy)}, {"polarity": 65.0},
                 corpus_name="demo_corpus.csv", losses=[(1, 0.4)])
    for run_id in (a, b):
        store.set_progress(run_id, summary={"corpus": same})
    diff = config_diff(store.get(a), store.get(b))
    assert "corpus" not in diff["setting"].tolist()  # one corpus, read from the copy and from the file
    store.set_progress(b, summary={"corpus": {"fingerprint": "f2", "content_key": "c2"}})
    diff = config_diff(store.get(a), store.get(b))
    assert "corpus" in diff["setting"].tolist() and str(copy) not in diff.to_string()  # by name, never the copy
    c = finished(store, page_config(tiny_model_dir, recipe="cosent"), {"sts_spearman": 50.0},
                 losses=[(1, 3.0)])
    store.set_progress(c, summary={"corpus": {"fingerprint": "f3", "content_key": "c3"}})
    at = open_runs(app, a)
    at.selectbox(key="runs:b").set_value(c).run()
    no_errors(at)
    captions = [x.value for x in at.caption]
    assert any(x.startswith("A and B were evaluated on different corpora") for x in captions), captions
    assert any("train different losses: their curves share an axis but not a scale" in x for x in captions), captions
