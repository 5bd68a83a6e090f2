"""A generation as a background run (core.generation.job) against a loopback OpenAI-compatible server, and the
Generate page: it shows the finished generation's counts and quality plot, and "Train on this" hands the file to
the Train page (lists become the corpus; negatives the mgh recipe's negatives file)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from core.errors import UserError
from core.generation.job import generation_config
from core.jobs import worker
from core.runs.store import RunStore
from tests.conftest import button, no_errors
from tests.openai_server import LoopbackServer
from tests.test_generate_cli import TOPICS, _list_answer, _negatives_answer

GENERATE = "app_pages/10_Generate.py"


def _generate(home, tiny_model_dir, kind: str, answers, rows: pd.DataFrame, **settings) -> str:
    """A generation run executed in this process into `home`; returns its id."""
    source = home / f"{kind}-source.csv"
    rows.to_csv(source, index=False)
    store = RunStore(home)
    with LoopbackServer(answers) as server:
        config = generation_config(kind, str(source), f"generated_{kind}.csv", "tiny", server.url, settings,
                                   reference=str(tiny_model_dir))
        run_id = store.create("generate", config)
        worker.execute(store, run_id)
    return run_id


@pytest.fixture
def lists_run(contrastlab_home, tiny_model_dir) -> str:
    rows = pd.DataFrame({"text": [f"a short story about {t} number {i} today" for i in range(2) for t in TOPICS]})
    return _generate(contrastlab_home, tiny_model_dir, "lists", _list_answer, rows, method="stepwise", steps=4)


def test_a_generation_run_keeps_its_file_and_measures_its_quality(lists_run, contrastlab_home):
    run = RunStore(contrastlab_home).get(lists_run)
    assert run.status == "done", run.error
    result = run.metrics_after
    assert result["counts"]["lists"] == 24 and result["kind"] == "lists"
    positions = result["quality"]["positions"]
    assert [p["position"] for p in positions] == [2, 3, 4, 5] and all(p["n"] == 24 for p in positions)
    assert json.loads(open(run.artefacts["sidecar"]).read())["settings"]["method"] == "stepwise"
    assert pd.read_csv(run.artefacts["generated"])["rank"].max() == 5
    assert len(run.progress["preview"]) == 5  # the latest items, as the page shows them while it runs


def test_a_bad_generation_config_is_refused_before_a_run(tmp_path):
    with pytest.raises(UserError, match="lists or negatives"):
        generation_config("rows", "s.csv", "o.csv", "m", None, {})
    with pytest.raises(UserError, match="file name ending in .csv"):
        generation_config("lists", "s.csv", "../o.csv", "m", None, {})
    with pytest.raises(UserError, match="Unknown generation settings"):
        generation_config("lists", "s.csv", "o.csv", "m", None, {"temperature": 2})
    with pytest.raises(UserError, match="--steps"):
        generation_config("lists", "s.csv", "o.csv", "m", None, {"steps": 0})


def test_the_page_shows_the_generation_and_trains_on_its_lists(app, lists_run):
    app.run()
    at = app.switch_page(GENERATE).run()
    no_errors(at)
    assert any("24 lists, 120 sentences" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 1
    button(at, "Train on this").click().run()
    no_errors(at)
    assert at.session_state["corpus"].kind == "lists"  # the generated lists are the corpus now


def test_train_on_generated_negatives_sets_the_mgh_recipes_file(app, contrastlab_home, tiny_model_dir):
    rows = pd.DataFrame({"query": [f"how does {t} work" for t in TOPICS]})
    run_id = _generate(contrastlab_home, tiny_model_dir, "negatives", _negatives_answer, rows)
    assert RunStore(contrastlab_home).get(run_id).metrics_after["quality"]["means"]["N1"]["n"] == 12
    app.run()
    at = app.switch_page(GENERATE).run()
    no_errors(at)
    button(at, "Train on this").click().run()
    no_errors(at)
    assert at.session_state["generated_file"]["kind"] == "negatives"
    at = at.switch_page("app_pages/2_Train.py").run()  # st.switch_page does not move an AppTest
    at.selectbox(key="train:recipe:Supervised").set_value("mgh").run()
    no_errors(at)
    assert at.radio(key="train:negatives").value == "The generated negatives"
    assert any("generated_negatives.csv" in c.value and "Generate page wrote" in c.value for c in at.caption)


def test_a_generation_run_is_listed_beside_training_runs(app, lists_run, capsys):
    from core.cli import main

    assert main(["runs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert any(r["run_id"] == lists_run and r["kind"] == "generate" for r in listed["runs"])
    assert main(["runs"]) == 0
    assert lists_run in capsys.readouterr().out
    app.run()
    at = app.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
