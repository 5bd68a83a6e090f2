"""An export re-runs its run (issue 31, section 1): a run trained from the pages on an uploaded file, with
duplicates dropped on the Corpus page, is exported, and `train --config config.yaml --corpus ORIGINAL.csv` on a
fresh home trains on the user's own file without a warning and gives the same figures. The config, the card and
the run's labels name the file the user uploaded, never the app's copy of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

import core.jobs.launch
import core.jobs.worker
from core.cli import main
from core.data.content import Content
from core.evaluation.headline import HEADLINE
from core.runs.export import CONFIG_FILE, export_run
from core.runs.labels import differences
from core.runs.store import RunStore
from tests.conftest import button, no_errors

FILE = "emotion tweets.csv"
FEELINGS = ("joy", "anger", "fear")


def tweets() -> pd.DataFrame:
    """Tweets under a name the loader recognises ('tweet', 'emotion'), a column the run does not read, and repeats
    for the Corpus page to drop."""
    rows = [{"id": i, "tweet": f"so much {FEELINGS[i % 3]} today, day {i}", "emotion": FEELINGS[i % 3],
             "likes": i * 3} for i in range(90)]
    return pd.DataFrame(rows + rows[:6])


def test_a_page_run_on_an_upload_reruns_from_its_export_on_the_original_file(app, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(core.jobs.launch, "start",  # the job runs to its end in this process
                        lambda store, run_id: core.jobs.worker.execute(store, run_id) or os.getpid())
    original = tmp_path / FILE
    tweets().to_csv(original, index=False)
    app.run()
    at = app.switch_page("app_pages/1_Corpus.py").run()
    at.radio(key="corpus_source").set_value("Upload a file").run()
    at.file_uploader[0].upload(FILE, original.read_bytes(), "text/csv").run()
    at.checkbox(key="drop_duplicates").check().run()
    no_errors(at)
    at.switch_page("app_pages/2_Train.py").run()
    for key, value in {"train:examples": 32, "train:batch:sup": 16}.items():
        at.number_input(key=key).set_value(value)
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = RunStore().list()
    assert run.status == "done" and run.corpus_name == FILE and run.config["drop_duplicates"] is True
    assert Path(run.config["corpus"]).name != FILE  # trained on the app's copy ...

    out = export_run(RunStore(), run.id, tmp_path / "exports", embeddings=False)
    config = Path(out["dir"]) / CONFIG_FILE
    entry = yaml.safe_load(config.read_text())["corpus"]
    content = Content.of(tweets()[["tweet", "emotion"]])  # the columns the run read
    assert entry == {"name": FILE, **content.entry()}  # ... and the export names the user's file and its content
    card = (Path(out["dir"]) / "model" / "README.md").read_text()
    assert f"`{FILE}`" in card and f"--corpus '{FILE}'" in card and Path(run.config["corpus"]).stem not in card

    home_b = tmp_path / "home-b"  # another machine: a fresh home, the user's own file
    monkeypatch.setenv("CONTRASTLAB_HOME", str(home_b))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--corpus", str(original), "--json"]) == 0
    captured = capsys.readouterr()
    assert "is not the" not in captured.err, captured.err
    rerun = RunStore(home_b).get(json.loads(captured.out)["run_id"])
    assert rerun.config["corpus"] == str(original) and rerun.config["drop_duplicates"] is True
    shown = [m.key for m in HEADLINE if m.key in run.metrics_after]
    assert shown and all(rerun.metrics_after[key] == pytest.approx(run.metrics_after[key], abs=0.05)
                         for key in shown), (run.metrics_after, rerun.metrics_after)
    assert "corpus" not in differences([run, rerun])[run.id]  # one corpus by content, whatever its path
