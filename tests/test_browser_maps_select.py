"""The Maps page in headless Chromium with a finished run: coloured by neighbourhood change with arrows on, a box
dragged with the mouse over the middle of the reference map lists the texts plotly selected (a table of text, label,
split and neighbourhood change) and marks them on both maps; a rerun that redraws the maps keeps both; the button
clears them. Screenshot: maps-selection.png."""

from __future__ import annotations

import pytest

import core.jobs.worker
from core.analysis.maps import CHANGE
from core.data.corpus import demo_corpus_path
from core.runs.store import RunStore
from core.training.config import TrainConfig
from tests import test_browser
from tests.test_browser import assert_no_errors, screenshot, wait_idle

pytestmark = pytest.mark.browser

CHARTS = "[...document.querySelectorAll('.js-plotly-plot')].map(gd => gd._fullLayout)"  # JS: each map's layout
CHARTS_DATA = "[...document.querySelectorAll('.js-plotly-plot')].map(gd => gd._fullData)"  # JS: each map's traces
MARKED = f"() => {CHARTS_DATA}.map(d => d.reduce((n, t) => n + (t.selectedpoints || []).length, 0))"  # selected points

home, server, browser, page = test_browser.home, test_browser.server, test_browser.browser, test_browser.page


@pytest.fixture(scope="module")
def finished_run(home, tiny_model_dir) -> str:
    """A small triplet run on the demo corpus, trained in this process into the server's home."""
    store = RunStore(home)
    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), reference=str(tiny_model_dir),
                         examples=32, batch_size=16).to_dict()
    run_id = store.create("train", config, corpus_name="demo_corpus")
    core.jobs.worker.execute(store, run_id)
    assert store.get(run_id).status == "done", store.get(run_id).error
    return run_id


def inside_box(page, chart: int, box: tuple[float, float, float, float]) -> list[int]:
    """Rows (customdata[0]) of the chart's points whose x, y lie in the data-space box (x0, x1, y0, y1)."""
    return page.evaluate("""([chart, [x0, x1, y0, y1]]) => {
        const gd = document.querySelectorAll('.js-plotly-plot')[chart], rows = [];
        for (const t of gd._fullData) (t.customdata || []).forEach((c, i) => {
            if (t.name !== 'picked' && t.x[i] >= x0 && t.x[i] <= x1 && t.y[i] >= y0 && t.y[i] <= y1) rows.push(c[0]);
        });
        return [...new Set(rows)].sort((a, b) => a - b);
    }""", [chart, list(box)])


def drag_box(page, chart: int) -> tuple[float, float, float, float]:
    """Drag the mouse over the middle third of the chart's plot area; the box in data units."""
    corners = page.evaluate("""(chart) => {
        const gd = document.querySelectorAll('.js-plotly-plot')[chart], l = gd._fullLayout;
        const box = gd.getBoundingClientRect(), w = l._size.w, h = l._size.h;
        const left = box.left + l._size.l, top = box.top + l._size.t;
        const px = [left + w / 3, left + 2 * w / 3], py = [top + h / 3, top + 2 * h / 3];
        return {px, py, x: px.map(p => l.xaxis.p2l(p - left)), y: py.map(p => l.yaxis.p2l(p - top))};
    }""", chart)
    (x0, x1), (y0, y1) = corners["px"], corners["py"]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=5)
    page.mouse.move(x1, y1, steps=5)
    page.mouse.up()
    xs, ys = sorted(corners["x"]), sorted(corners["y"])
    return xs[0], xs[1], ys[0], ys[1]


def test_box_selection_lists_the_selected_texts(server, page, finished_run):
    page.goto(server)
    page.get_by_text("demo_corpus").first.wait_for()
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Maps", exact=True).click()
    page.get_by_role("heading", name="Maps", exact=True).wait_for()
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=180_000)  # both maps: reference and fine-tuned
    wait_idle(page)
    assert_no_errors(page)
    page.get_by_role("radiogroup", name="Colour by").get_by_text(CHANGE, exact=True).click()
    page.wait_for_function(f"() => {CHARTS}.every(l => l.coloraxis && l.coloraxis.cmax === 1)")
    wait_idle(page)
    page.locator('[data-testid="stCheckbox"]', has_text="Arrows for the texts that moved most").click()
    page.wait_for_function(f"() => {CHARTS_DATA}[1].some(t => t.name.startsWith('moved most'))")
    wait_idle(page)
    assert page.get_by_role("heading", name="Selected texts").count() == 0
    assert page.evaluate(f"() => {CHARTS}.map(l => l.dragmode)") == ["select", "select"]  # a drag selects

    page.evaluate("""() => document.querySelectorAll('.js-plotly-plot')[0].on('plotly_selected',
        e => { window.__selected = [...new Set(e.points.map(p => p.customdata[0]))]; })""")
    box = drag_box(page, 0)
    page.wait_for_function("() => window.__selected !== undefined")
    selected = page.evaluate("() => window.__selected")  # what plotly reported to Streamlit
    inside = inside_box(page, 0, box)
    assert len(selected) > 10 and abs(len(selected) - len(inside)) <= 0.02 * len(inside) + 2  # the box's points
    page.get_by_role("heading", name=f"Selected texts · {len(selected)}").wait_for(timeout=60_000)
    wait_idle(page)
    assert_no_errors(page)
    grid = page.locator('[data-testid="stDataFrame"]').last
    # The grid draws on a canvas; its fallback table names the columns.
    headers = grid.locator('th[role="columnheader"]')
    headers.last.wait_for(state="attached")
    assert headers.all_text_contents() == ["text", "label", "split", CHANGE]
    # Both maps mark the selection (plotly's selectedpoints), so a rerun that redraws them still shows it.
    marked = page.evaluate(MARKED)
    assert marked == [len(selected), len(selected)]
    page.mouse.move(0, 0)
    screenshot(page, "maps-selection.png")

    # A rerun that redraws the maps (coloured by split now) keeps the list and the marks on both maps.
    page.get_by_role("radiogroup", name="Colour by").get_by_text("split", exact=True).click()
    page.wait_for_function(f"() => {CHARTS}.every(l => l.legend.title.text === 'split')")
    wait_idle(page)
    assert page.get_by_role("heading", name=f"Selected texts · {len(selected)}").count() == 1
    assert page.evaluate(MARKED) == [len(selected), len(selected)]
    assert_no_errors(page)

    page.get_by_role("button", name="Clear the selection").click()
    page.get_by_role("heading", name=f"Selected texts · {len(selected)}").wait_for(state="detached")
    page.wait_for_function(f"() => ({MARKED})().every(n => n === 0)")
    assert_no_errors(page)
