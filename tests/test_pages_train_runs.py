"""Train and Runs & export pages through AppTest, on the tiny model: recipes, example preview, a run started
from the page (executed in-process instead of a worker process, to stay fast), the live panel's end states,
cancel, the runs table, compare, delete and export."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import core.jobs.launch
import core.jobs.worker
from core.data.content import persist_table
from core.data.corpus import demo_corpus_path, load_corpus
from core.errors import UserError
from core.runs.store import RunStore
from core.training.config import TrainConfig
from core.training.recipes import RECIPES
from tests.conftest import APP, APP_TIMEOUT_S, button, no_errors

TINY_RUN = {"train:examples": 48, "train:batch:sup": 16}


def open_page(at: AppTest, page: str) -> AppTest:
    at.run()
    return at.switch_page(page).run()


@pytest.fixture
def train_page(app) -> AppTest:
    return open_page(app, "app_pages/2_Train.py")


@pytest.fixture
def synchronous_worker(monkeypatch):
    """launch.start runs the job to its end in this process, so the page's next render sees it finished."""
    monkeypatch.setattr(core.jobs.launch, "start", lambda store, run_id: core.jobs.worker.execute(store, run_id) or os.getpid())


@pytest.fixture
def idle_worker(monkeypatch):
    """launch.start does nothing: the run stays queued, as while a real worker is still starting."""
    monkeypatch.setattr(core.jobs.launch, "start", lambda store, run_id: 0)


def metrics(at: AppTest) -> dict:
    return {m.label: m for m in at.metric}


def store() -> RunStore:
    return RunStore()


def trained_run(model_dir: Path) -> str:
    """A finished tiny training run, made without the pages."""
    runs = store()
    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(model_dir), examples=32, batch_size=16)
    run_id = runs.create("train", config.to_dict())
    core.jobs.worker.execute(runs, run_id)
    assert runs.get(run_id).status == "done"
    return run_id


def test_train_page_offers_every_recipe_grouped(train_page):
    at = train_page
    no_errors(at)
    supervised = at.selectbox(key="train:recipe:Supervised")
    assert supervised.options == [r.title for r in RECIPES.values() if not r.self_supervised]
    assert at.selectbox(key="train:margin:triplet").value == 0.1

    supervised.set_value("cosine").run()
    no_errors(at)
    assert "Margin" not in [s.label for s in at.selectbox]  # CosineSimilarityLoss has no margin

    at.get("button_group")[0].set_value("Self-supervised").run()
    no_errors(at)
    assert at.selectbox(key="train:recipe:Self-supervised").options == [
        r.title for r in RECIPES.values() if r.self_supervised]
    assert at.selectbox(key="train:margin:crop").label == "Scale"
    assert at.radio(key="train:docs").value == "Demo documents"
    assert at.number_input(key="train:batch:ss").value == 64  # crop defaults (docs/definitions.md, Crop augmentation)


def test_preview_mines_examples_and_shows_counts(train_page):
    at = train_page
    button(at, "Preview examples").click().run()
    no_errors(at)
    cards = metrics(at)
    assert int(cards["Available"].value.replace(",", "")) >= int(cards["Used (N)"].value.replace(",", "")) > 0
    assert "Removed by threshold" in cards
    assert list(at.dataframe[0].value.columns) == ["anchor", "anchor label", "positive", "positive label", "negative",
                                                   "negative label"]

    at.number_input(key="train:threshold").set_value(1.0).run()
    button(at, "Preview examples").click().run()
    assert not at.exception
    assert at.error[0].value.startswith("Mining found no triplet examples at cosine threshold 1.0")

    at.get("button_group")[0].set_value("Self-supervised").run()
    button(at, "Preview crops").click().run()
    no_errors(at)
    assert {"Documents", "Skipped documents", "Pairs used"} <= metrics(at).keys()
    assert list(at.dataframe[0].value.columns) == ["anchor", "positive"]
    one_per_doc = int(metrics(at)["Pairs used"].value.replace(",", ""))
    at.number_input(key="train:pairs_per_doc").set_value(2).run()
    button(at, "Preview crops").click().run()
    no_errors(at)
    assert int(metrics(at)["Pairs used"].value.replace(",", "")) > one_per_doc


def test_start_trains_and_shows_before_after_in_any_tab(train_page, synchronous_worker, app):
    at = train_page
    for key, value in TINY_RUN.items():
        at.number_input(key=key).set_value(value)
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = store().list()
    assert run.kind == "train" and run.status == "done"
    assert run.config["examples"] == 48 and run.config["reference"] == run.config["model"]
    assert run.config["corpus"] == str(demo_corpus_path())
    assert at.query_params["run"] == run.id
    assert f"**Run** · `{run.id}`" in [m.value for m in at.sidebar.markdown]
    assert any("badge[:material/check_circle: done]" in m.value for m in at.markdown)
    cards = metrics(at)
    assert {"P@16", "S@16", "kNN accuracy", "Linear probe"} <= cards.keys()
    assert cards["P@16"].delta.startswith(("+", "-"))
    assert len(at.get("plotly_chart")) == 1  # loss curve

    second = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S)
    second.query_params["run"] = run.id  # a second tab, or a reload, on the same URL
    open_page(second, "app_pages/2_Train.py")
    no_errors(second)
    assert any(run.id in m.value and "done" in m.value for m in second.markdown)


def test_cancel_marks_a_run_cancelled_and_sweep_starts(train_page, idle_worker):
    at = train_page
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = store().list()
    assert any("badge[:material/schedule: queued]" in m.value for m in at.markdown)
    assert button(at, "Start training").disabled  # one run at a time from this page
    button(at, "Cancel run").click().run()
    at.run()
    no_errors(at)
    assert store().get(run.id).status == "cancelled"
    assert at.warning[0].value == "The run was cancelled; no model was saved."

    at.text_input(key="train:sweep:triplet").set_value("0.1, 1").run()
    button(at, "Start sweep").click().run()
    no_errors(at)
    sweep = store().list(kind="sweep")[0]
    assert sweep.config["margins"] == [0.1, 1.0] and sweep.config["recipes"] == ["triplet"]


def test_run_from_an_uploaded_corpus_reads_a_saved_copy(app, idle_worker):
    rows = "".join(f"sentence {i} about topic {i % 2},{'ab'[i % 2]}\n" for i in range(30))
    at = open_page(app, "app_pages/1_Corpus.py")
    at.radio(key="corpus_source").set_value("Upload a file").run()
    at.file_uploader[0].upload("mine.csv", ("text,label\n" + rows).encode(), "text/csv").run()
    at.switch_page("app_pages/2_Train.py").run()
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = store().list()
    saved = Path(run.config["corpus"])
    assert saved.parent == Path(os.environ["CONTRASTLAB_HOME"]) / "corpora"
    assert len(load_corpus(saved, run.config["text_col"], run.config["label_col"]).train_texts) == 27
    assert run.corpus_name == "mine.csv"  # the file as the user named it, which its export names


def test_failed_run_shows_its_error_line_and_log(app):
    runs = store()
    run_id = runs.create("train", {"corpus": "x.csv"})
    runs.mark_failed(run_id, "Corpus file x.csv does not exist; check the path.")
    app.query_params["run"] = run_id
    at = open_page(app, "app_pages/2_Train.py")
    assert not at.exception
    assert at.error[0].value == "The run failed: Corpus file x.csv does not exist; check the path."
    assert any(c.value.startswith("Full log: `") and c.value.endswith("worker.log`") for c in at.main.caption)


def test_runs_page_lists_compares_exports_and_deletes(app, tiny_model_dir):
    done_id = trained_run(tiny_model_dir)
    runs = store()
    active = TrainConfig(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), recipe="mnrl", margin=10.0)
    active_id = runs.create("train", active.to_dict())
    runs.claim(active_id, os.getpid())  # a live worker owns it
    app.query_params["run"] = done_id
    at = open_page(app, "app_pages/7_Runs.py")
    no_errors(at)
    table = at.dataframe[0].value
    assert set(table["run"]) == {done_id, active_id}
    assert table.set_index("run").loc[done_id, "status"] == "done"
    assert table.set_index("run")["P@k"].isna()[active_id] and at.dataframe[0].proto.placeholder == "–"  # not "None"
    assert at.selectbox(key="runs:pick").value == done_id
    # recipe, margin, examples, batch, and distance (a triplet setting mnrl does not have)
    assert "**Settings that differ** (5)" in [m.value for m in at.markdown]
    titles = [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]
    assert "Training loss" in titles  # the two runs' losses on one plot

    button(at, "Export").click().run()
    no_errors(at)
    assert {"Model (zip)", "Embeddings (Parquet)", "Config (YAML)"} <= {b.label for b in at.get("download_button")}
    [export] = (Path(os.environ["CONTRASTLAB_HOME"]) / "exports").iterdir()
    assert {"model.zip", "embeddings.parquet", "config.yaml"} <= {p.name for p in export.iterdir()}

    at.selectbox(key="runs:pick").set_value(active_id).run()
    button(at, "Delete permanently").click().run()
    assert not at.exception
    assert at.error[0].value.startswith(f"Run {active_id} is still queued; cancel it")
    assert runs.get(active_id).active

    at.selectbox(key="runs:pick").set_value(done_id).run()
    button(at, "Delete permanently").click().run()
    no_errors(at)
    assert at.success[0].value == f"Deleted run {done_id}."
    assert [r.id for r in runs.list()] == [active_id]


def test_persist_table_is_atomic_content_addressed_and_keeps_the_rows(tmp_path):
    """The copy holds the upload's rows as they are; dropping duplicates is the run's drop_duplicates setting, so the
    same setting on the original file reads the same corpus."""
    df = pd.read_csv(demo_corpus_path())
    doubled = pd.concat([df, df.head(5)], ignore_index=True).assign(extra=1)
    path = persist_table(doubled, ["text", "label", None])
    assert path.parent == Path(os.environ["CONTRASTLAB_HOME"]) / "corpora" and path.suffix == ".parquet"
    assert persist_table(doubled.copy(), ["text", "label"]) == path  # reused: named by its content
    assert list(pd.read_parquet(path).columns) == ["text", "label"] and len(pd.read_parquet(path)) == len(doubled)
    deduped = load_corpus(path, drop_duplicates=True)
    assert len(load_corpus(path).train_texts) > len(deduped.train_texts)
    assert deduped.fingerprint == load_corpus(demo_corpus_path(), drop_duplicates=True).fingerprint
    assert not list(path.parent.glob(".*"))  # no temp files left
    with pytest.raises(UserError, match="There is no column named 'texts'"):
        persist_table(doubled, ["texts"])


def test_sweep_engine_choice_reaches_the_sweep_config(train_page, idle_worker):
    at = train_page
    engine = at.radio(key="train:sweep:engine")
    assert engine.options == ["Local", "Ray"] and engine.value == "Local"
    engine.set_value("Ray").run()
    button(at, "Start sweep").click().run()
    no_errors(at)
    [sweep] = store().list(kind="sweep")
    assert sweep.config["engine"] == "ray" and sweep.config["address"] is None


def test_no_engine_choice_without_ray(app, monkeypatch):
    monkeypatch.setattr("core.jobs.ray_sweep.ray_available", lambda: False)
    at = open_page(app, "app_pages/2_Train.py")
    no_errors(at)
    assert "train:sweep:engine" not in [r.key for r in at.radio]


@pytest.fixture
def gpus(monkeypatch):
    """The machine shows this many CUDA devices to the Train page (counted once per server, so recounted here)."""
    import ui.resources

    def show(count: int) -> None:
        monkeypatch.setattr(ui.resources, "visible_gpus", lambda: count)
        ui.resources.gpu_count.clear()

    yield show
    ui.resources.gpu_count.clear()


def test_process_count_is_offered_only_with_two_gpus_or_more(app, idle_worker, gpus):
    gpus(1)
    at = open_page(app, "app_pages/2_Train.py")
    assert "train:nproc" not in [n.key for n in at.number_input]

    gpus(4)
    at = open_page(AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S), "app_pages/2_Train.py")
    no_errors(at)
    processes = at.number_input(key="train:nproc")
    assert (processes.label, processes.value, processes.max) == ("Processes (GPUs)", 1, 4)
    processes.set_value(2).run()
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = store().list()
    assert run.config["nproc"] == 2 and run.config["nnodes"] == 1


def test_training_texts_in_the_card_is_a_train_page_choice_off_by_default(train_page, idle_worker):
    at = train_page
    box = next(c for c in at.checkbox if c.label == "Training texts in the model card")
    assert box.value is False
    box.check().run()
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = store().list()
    assert run.config["card_examples"] is True


def test_the_trackers_choice_has_room_for_its_chips(train_page):
    """Issue 51: in a quarter of the row the "Report to" chips were cut off ("rboard")."""
    column = next(c for c in train_page.columns if any(getattr(child, "label", None) == "Report to"
                                                       for child in c.children.values()))
    assert column.proto.weight == pytest.approx(0.5)  # half the row: a quarter cut the chips
