"""The Streamlit pages run headless through AppTest: they render, evaluate and show errors without tracebacks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60  # the first run imports torch and sentence-transformers



@pytest.fixture
def corpus_page(app) -> AppTest:
    app.run()
    return app.switch_page("app_pages/1_Corpus.py").run()


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
    assert "**Corpus** · `demo_corpus`" in [m.value for m in app.sidebar.markdown]
    assert "Corpus" in [link.proto.page for link in app.get("page_link")]


def test_corpus_page_reports_charts_and_evaluates_once(corpus_page, monkeypatch):
    at = corpus_page
    assert not at.exception and not at.error
    assert at.subheader[0].value == "Validation report · `demo_corpus`"
    cards = metrics(at)
    assert cards["Rows read"] == cards["Rows kept"] == "829"
    assert cards["Over-long texts"] == "0"
    assert len(at.get("plotly_chart")) == 1
    assert len(at.dataframe) == 1

    import core.evaluation.corpus_eval

    calls = []
    real = core.evaluation.corpus_eval.evaluate
    monkeypatch.setattr(core.evaluation.corpus_eval, "evaluate", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    next(b for b in at.button if b.label == "Run reference evaluation").click().run()
    assert not at.exception and not at.error
    cards = metrics(at)
    assert {"P@16", "S@16", "kNN accuracy (k=10)", "Linear probe accuracy"} <= cards.keys()
    assert 0 <= float(cards["P@16"]) <= 100
    line = next(c.value for c in at.caption if c.value.startswith("95% intervals: "))
    assert re.fullmatch(r"95% intervals: P@16 [\d.]+–[\d.]+ · S@16 [\d.]+–[\d.]+ · kNN accuracy [\d.]+–[\d.]+% · "
                        r"Linear probe [\d.]+–[\d.]+%\.", line), line  # a CI beside every figure (issue 25)

    at.run()  # a rerun shows the cached result: no button, no second evaluation
    assert "P@16" in metrics(at) and "Run reference evaluation" not in [b.label for b in at.button]
    assert calls == [1]


def test_bad_upload_shows_one_line_error_and_keeps_corpus(corpus_page):
    at = corpus_page
    at.radio(key="corpus_source").set_value("Upload a file").run()
    at.file_uploader[0].upload("broken.parquet", b"text,label\nnot parquet,1\n").run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "broken.parquet is not a Parquet file (it lacks the PAR1 header); check the file or its extension."]
    assert not at.subheader  # no other corpus's report under the error (issue 51); the demo corpus stays current
    assert "**Corpus** · `demo_corpus`" in [m.value for m in at.sidebar.markdown]

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
    assert at.subheader[0].value == "Validation report · `mine`"
    assert "**Corpus** · `mine`" in [m.value for m in at.sidebar.markdown]

    at.radio(key="corpus_source").set_value("Paste a table").run()
    at.text_area(key="corpus_paste").set_value("text,label\nonly one,a\nclass here,a\n").run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.startswith("Only one class ('a')")
    assert not at.subheader  # no other corpus's report under the pickers (issue 51); mine stays current
    assert "**Corpus** · `mine`" in [m.value for m in at.sidebar.markdown]


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


def test_every_page_file_is_registered_once_with_its_own_title():
    from ui import nav

    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "app_pages").glob("[!_]*.py"))
    assert sorted(page.path for page in nav.PAGES) == files
    assert len({page.title for page in nav.PAGES}) == len(nav.PAGES)
    assert nav.PAGES[0] is nav.HOME and nav.WORKFLOW[0] is nav.CORPUS
    assert all(page.blurb for page in nav.WORKFLOW)


def test_pages_run_inside_the_app_frame(app):
    app.run()
    for page in ("app_pages/7_Runs.py", "app_pages/8_Definitions.py"):
        at = app.switch_page(page).run()
        assert not at.exception
        summary = [m.value for m in at.sidebar.markdown]
        assert summary.count("**Corpus** · `demo_corpus`") == 1  # drawn once, by app.py
    assert app.title[0].value == "Definitions"
    assert app.markdown and not app.warning  # docs/definitions.md, rendered


def test_definitions_page_says_when_the_document_is_missing(tmp_path):
    (tmp_path / "app_pages").mkdir()
    page = tmp_path / "app_pages" / "8_Definitions.py"
    page.write_text((ROOT / "app_pages" / "8_Definitions.py").read_text())
    at = AppTest.from_file(str(page)).run()
    assert not at.exception
    assert at.warning[0].value.startswith("The definitions are missing")


def test_no_pages_directory_next_to_the_entry_point():
    """A pages/ folder next to app.py switches Streamlit to its old multipage mode whenever a process's first run
    asks for a page (and on every AppTest run): the page then runs alone, without app.py's state and sidebar."""
    assert not (ROOT / "pages").exists()
    assert (ROOT / "app_pages").is_dir()


def _magic_writes(source: str) -> int:
    """How many expressions Streamlit's magic would write on a page with this source."""
    import ast

    from streamlit.runtime.scriptrunner.magic import MAGIC_MODULE_NAME, add_magic

    return sum(isinstance(node, ast.Name) and node.id == MAGIC_MODULE_NAME for node in ast.walk(add_magic(source, "p")))


def test_no_page_relies_on_streamlit_magic():
    """.streamlit/config.toml turns magic off (rewriting each page's syntax tree cost every AppTest run): a bare
    expression on a page would then show nothing, so no page has one."""
    from streamlit import config

    assert config.get_option("runner.magicEnabled") is False
    assert _magic_writes("x = 1\nx\n") == 1  # what the check below would find
    pages = [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py"))]
    assert len(pages) > 5
    writes = {page.name: _magic_writes(page.read_text(encoding="utf-8")) for page in pages}
    assert writes == {page.name: 0 for page in pages}


def test_an_upload_is_kept_and_offered_again_after_a_reload(corpus_page, tiny_model_dir, monkeypatch):
    """Issue 51: an upload was lost on a browser reload. Each upload is kept in the home (its own copy, named by the
    user's file name) and the Corpus page lists the recent ones to pick again."""
    from core.data.content import RECENT_FILE, recent_uploads
    from core.storage import corpora_dir

    at = corpus_page
    rows = "".join(f"sentence {i} about topic {i % 2},{'ab'[i % 2]}\n" for i in range(30))
    at.radio(key="corpus_source").set_value("Upload a file").run()
    at.file_uploader[0].upload("emotion tweets.csv", ("text,label\n" + rows).encode(), "text/csv").run()
    assert [e["name"] for e in recent_uploads()] == ["emotion tweets.csv"]

    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    again = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=TIMEOUT_S).run()
    again = again.switch_page("app_pages/1_Corpus.py").run()
    again.radio(key="corpus_source").set_value("A recent upload").run()
    assert not again.exception and not again.error
    assert again.selectbox(key="corpus_recent").options == ["emotion tweets.csv"]
    assert again.subheader[0].value == "Validation report · `emotion tweets`"

    (corpora_dir() / RECENT_FILE).write_text("{not json")  # a damaged list is no list, never an error
    assert recent_uploads() == []
