"""The Streamlit pages run headless through AppTest: they render, evaluate and show errors without tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60  # the first run imports torch and sentence-transformers


@pytest.fixture
def app(monkeypatch, tiny_model_dir) -> AppTest:
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT_S)


@pytest.fixture
def corpus_page(app) -> AppTest:
    app.run()
    return app.switch_page("pages/1_Corpus.py").run()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_home_shows_demo_corpus_model_and_links(app):
    app.run()
    assert not app.exception
    assert app.title[0].value == "ContrastLab"
    cards = metrics(app)
    assert cards["Corpus"] == "demo_corpus"
    assert cards["Reference model"] == "model"  # the tiny model's directory name
    assert cards["Device"] == "cpu"
    assert "**Corpus** · demo_corpus" in [m.value for m in app.sidebar.markdown]
    assert "Corpus" in [link.proto.page for link in app.get("page_link")]


def test_corpus_page_reports_charts_and_evaluates_once(corpus_page, monkeypatch):
    at = corpus_page
    assert not at.exception and not at.error
    assert at.subheader[0].value == "Validation report · demo_corpus"
    cards = metrics(at)
    assert cards["Rows read"] == cards["Rows kept"] == "829"
    assert cards["Over-long texts"] == "0"
    assert len(at.get("plotly_chart")) == 1
    assert len(at.dataframe) == 1

    import core.evaluation.evaluate

    calls = []
    real = core.evaluation.evaluate.evaluate
    monkeypatch.setattr(core.evaluation.evaluate, "evaluate", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    next(b for b in at.button if b.label == "Run reference evaluation").click().run()
    assert not at.exception and not at.error
    cards = metrics(at)
    assert {"P@16", "S@16", "kNN accuracy (k=10)", "Linear probe accuracy"} <= cards.keys()
    assert 0 <= float(cards["P@16"]) <= 100

    at.run()  # a rerun shows the cached result: no button, no second evaluation
    assert "P@16" in metrics(at) and not at.button
    assert calls == [1]


def test_bad_upload_shows_one_line_error_and_keeps_corpus(corpus_page):
    at = corpus_page
    at.radio(key="corpus_source").set_value("Upload a file").run()
    at.file_uploader[0].upload("broken.parquet", b"text,label\nnot parquet,1\n").run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "broken.parquet is not a Parquet file (it lacks the PAR1 header); check the file or its extension."]
    assert at.subheader[0].value == "Validation report · demo_corpus"

    at.text_input[0].set_value("no-such-model").run()
    assert not at.exception
    assert at.error[-1].value.startswith("Could not find model 'no-such-model'; tried local directory")
    assert "**Reference model** · `model`" in [m.value for m in at.sidebar.markdown]  # unchanged


def test_upload_replaces_corpus_and_bad_paste_shows_error(corpus_page):
    at = corpus_page
    rows = "".join(f"sentence {i} about topic {i % 2},{'ab'[i % 2]}\n" for i in range(30))
    at.radio(key="corpus_source").set_value("Upload a file").run()
    at.file_uploader[0].upload("mine.csv", ("text,label\n" + rows).encode(), "text/csv").run()
    assert not at.exception and not at.error
    assert at.subheader[0].value == "Validation report · mine"
    assert "**Corpus** · mine" in [m.value for m in at.sidebar.markdown]

    at.radio(key="corpus_source").set_value("Paste a table").run()
    at.text_area(key="corpus_paste").set_value("text,label\nonly one,a\nclass here,a\n").run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.startswith("Only one class ('a')")
    assert at.subheader[0].value == "Validation report · mine"


def test_guard_shows_unexpected_errors_without_traceback():
    def page():
        import ui

        with ui.guard("The step"):
            raise RuntimeError("disk on fire\nsecond line")
        import streamlit as st

        st.write("still running")

    at = AppTest.from_function(page, default_timeout=TIMEOUT_S).run()
    assert not at.exception
    assert at.error[0].value == "The step failed unexpectedly (RuntimeError: disk on fire)."
    assert at.expander[0].label == "Details"
    assert at.markdown[-1].value == "still running"


def test_steps_link_only_existing_pages(tmp_path):
    from ui.nav import steps

    (tmp_path / "pages").mkdir()
    for name in ("1_Corpus.py", "5_Trade-off.py", "7_Runs_and_export.py", "9_Sweeps.py", "__init__.py"):
        (tmp_path / "pages" / name).write_text("")
    found = {s.label: s.path for s in steps(tmp_path)}
    assert found["Corpus"] == "pages/1_Corpus.py"
    assert found["Trade-off"] == "pages/5_Trade-off.py"
    assert found["Runs & export"] == "pages/7_Runs_and_export.py"
    assert found["Train"] is None and found["Maps"] is None
    assert found["Sweeps"] == "pages/9_Sweeps.py"
    assert len(found) == 8
