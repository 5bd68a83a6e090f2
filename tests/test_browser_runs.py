"""The Runs & export page's comparison in headless Chromium at the app's normal width (1280 px): with two finished
runs (a Train-page run and a quick run of the same tiny model), the comparison table shows every column, and the
before and after columns of both runs are filled for each headline metric a labelled corpus reports; a note and tags
are saved and the export offers the projector's TSV pair."""

from __future__ import annotations

import pytest

from core.data.corpus import demo_corpus_path
from core.jobs.quick import quick_config
from core.training.config import TrainConfig
from tests import test_browser
from tests.conftest import train_runs
from tests.test_browser import SCREENSHOTS, assert_no_errors, wait_idle

pytestmark = pytest.mark.browser

WIDTH = test_browser.NARROW_WIDTH
home, server, browser, narrow_page = (test_browser.home, test_browser.server, test_browser.browser,
                                      test_browser.narrow_page)  # the shared fixtures
COLUMNS = ["A before", "A after", "B before", "B after", "A − B, after", "95% CI, p (paired)"]
METRICS = ["P@k", "S@k", "kNN accuracy", "Linear probe"]


def finished_runs(home, model_dir) -> list[str]:
    """A Train-page run and a quick run on the demo corpus, trained in this process into the server's home."""
    corpus = str(demo_corpus_path())
    configs = [TrainConfig(corpus=corpus, model=str(model_dir), reference=str(model_dir), examples=32,
                           batch_size=16).to_dict(),
               quick_config({"corpus": corpus, "model": str(model_dir)}, 0.5)]
    return train_runs(home, configs, corpus_name="demo_corpus")


def table_cells(page) -> list[list[dict]]:
    """Each row of the comparison table (st.table): its cells' text and right edge in the viewport."""
    return page.evaluate("""() => [...document.querySelectorAll('[data-testid="stTable"] tr')].map(tr =>
        [...tr.querySelectorAll('th, td')].map(c => ({text: c.innerText.trim(), right: c.getBoundingClientRect().right,
                                                       width: c.getBoundingClientRect().width})))""")


def test_comparison_table_shows_every_column_filled_at_1280_px(server, narrow_page, home, tiny_model_dir):
    finished_runs(home, tiny_model_dir)
    page = narrow_page
    page.goto(server)
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Runs & export").click()
    page.get_by_role("heading", name="Compare two runs").wait_for(timeout=60_000)
    page.locator('[data-testid="stTable"]').wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    wait_idle(page)
    assert_no_errors(page)

    rows = table_cells(page)
    header = [cell["text"] for cell in rows[0]]
    assert header[1:] == COLUMNS, header
    body = {row[0]["text"]: row for row in rows[1:]}
    assert set(METRICS) <= body.keys(), body.keys()
    for cell in [c for row in rows for c in row]:
        assert 0 < cell["right"] <= WIDTH and cell["width"] > 30, cell  # on screen, not squeezed
    for metric in METRICS:
        values = [c["text"] for c in body[metric][1:5]]
        assert all(v and v != "–" for v in values), (metric, values)
    assert body["kNN accuracy"][5]["text"].endswith("pp")  # an accuracy's change in percentage points
    for metric in ("P@k", "S@k", "kNN accuracy"):  # the difference's paired interval and p-value
        assert body[metric][6]["text"].startswith("[") and ", p " in body[metric][6]["text"], body[metric][6]

    # the selected run's note and tags, and its export with the projector's TSV pair beside the other downloads
    page.get_by_text("Note and tags", exact=True).click()
    page.get_by_role("textbox", name="Note").fill("quick point at margin 0.5")
    page.get_by_role("textbox", name="Tags").fill("quick, Quick , margin")
    page.get_by_role("button", name="Save note and tags").click()
    page.get_by_text("Saved the note and tags of run").wait_for()
    page.get_by_role("button", name="Export").click()
    page.get_by_role("button", name="Projector metadata (TSV)").wait_for(timeout=60_000)
    wait_idle(page)
    assert_no_errors(page)
    assert page.get_by_role("textbox", name="Tags").input_value() == "quick, margin"
    for label in ("Model (zip)", "Embeddings (Parquet)", "Config (YAML)", "Projector vectors (TSV)"):
        assert page.get_by_role("button", name=label).is_visible()

    page.mouse.move(0, 0)
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": max(900, height)})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "runs-compare.png"))
