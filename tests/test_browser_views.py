"""The analysis pages in headless Chromium, one server, one home and one browser for them all, with finished tiny
runs trained once in this process into the server's home: two seeds of one triplet configuration (a sweep's grid)
and a quick run (another budget). The tests read those runs and add none, so each sees the same three.

- Trade-off, at the app's normal width (1280 px): the seeds are drawn as one point, their mean; every point carries
  its label on the plot, inside it and clear of the other labels; the error bars default to the bootstrap 95% CI and
  switch to the standard deviation on request, which widens a run's bars and says so in the title.
- Runs & export, at 1280 px: the comparison table of the newest two runs shows every column, and the before and after
  columns of both are filled for each headline metric a labelled corpus reports; a note and tags are saved and the
  export offers the projector's TSV pair.
- Attention, at 1280 px: a typed text with markup characters shows its tokens literally on the enlarged head's axes,
  a click on a head's tile enlarges that head, another layer can be chosen (with the note that ATA weights stay
  last-layer).
- Maps: coloured by neighbourhood change with arrows on, a box dragged with the mouse over the middle of the
  reference map lists the texts plotly selected (a table of text, label, split and neighbourhood change) and marks
  them on both maps; a rerun that redraws the maps keeps both; the button clears them.
"""

from __future__ import annotations

import pytest

from core.analysis.maps import CHANGE
from core.data.corpus import demo_corpus_path
from core.jobs.quick import quick_config
from core.jobs.sweep import grid, sweep_config
from tests import test_browser
from tests.conftest import train_runs
from tests.test_browser import NARROW_VIEWPORT, SCREENSHOTS, assert_no_errors, screenshot, wait_idle

pytestmark = pytest.mark.browser

WIDTH = test_browser.NARROW_WIDTH
home, server, browser, page, narrow_page = (test_browser.home, test_browser.server, test_browser.browser,
                                            test_browser.page, test_browser.narrow_page)  # the shared fixtures
STANDBY = False  # the page keeps a pre-warmed worker waiting; these tests start no run there (test_browser.server)


@pytest.fixture(scope="module")
def finished_runs(home, tiny_model_dir) -> list[str]:
    """A quick run and two seeds of a tiny triplet run (a sweep's grid) on the demo corpus, trained in this process
    into the server's home; the second seed, the newest, is the one a new session's pages show, and the Runs page
    compares it with the first (the quick run has no kNN figures to compare: it scores the trade-off only)."""
    corpus = str(demo_corpus_path())
    base = {"corpus": corpus, "model": str(tiny_model_dir), "recipe": "triplet", "examples": 32, "batch_size": 16,
            "lr": 5e-3}  # a random tiny model barely moves at the default rate: these runs land apart
    configs = [quick_config(base, 0.5), *grid(sweep_config(base, ["triplet"], [0.1], seeds=2))]
    return train_runs(home, configs, corpus_name="demo_corpus")


# --- Trade-off ----------------------------------------------------------------------------------------------------

LABELS = ["reference", "triplet m0.1 · 2 seeds", "triplet m0.5 (quick)"]


def plot_state(page) -> dict:
    """What the browser drew: each trace's name, labels and vertical error bars, the title, and the screen boxes of
    the labels and of the plot area."""
    return page.evaluate("""() => {
        const gd = document.querySelector('.js-plotly-plot');
        const box = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
        return {
            traces: gd.data.map(t => ({name: t.name, text: t.text || null, up: t.error_y ? t.error_y.array : null})),
            title: gd.layout.title.text,
            labels: [...gd.querySelectorAll('.textpoint text')].map(t => ({text: t.textContent,
                                                                           box: box(t.getBoundingClientRect())})),
            plot: box(gd.getBoundingClientRect()),
        };
    }""")


def hover(page, trace: int) -> str:
    """The hover label of a trace's first point, with the mouse moved onto it."""
    x, y = page.evaluate("""(i) => {
        const gd = document.querySelector('.js-plotly-plot'), l = gd._fullLayout, box = gd.getBoundingClientRect();
        const t = gd.data[i];
        return [box.left + l._size.l + l.xaxis.l2p(t.x[0]), box.top + l._size.t + l.yaxis.l2p(t.y[0])];
    }""", trace)
    label = page.locator(".hoverlayer .hovertext")
    page.mouse.move(0, 0)  # off the plot: the previous point's label goes first, so it is never read for this one
    label.first.wait_for(state="detached", timeout=10_000)
    page.mouse.move(x - 30, y - 30)
    page.mouse.move(x, y)
    label.wait_for(timeout=10_000)
    return label.text_content()


def overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def test_tradeoff_points_are_labelled_and_error_bars_switch_at_1280_px(server, narrow_page, finished_runs):
    page = narrow_page
    page.goto(server)
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Trade-off").click()
    page.get_by_role("heading", name="Trade-off", exact=True).wait_for()
    page.locator(".js-plotly-plot .textpoint text").first.wait_for(timeout=120_000)
    wait_idle(page)
    assert_no_errors(page)
    page.mouse.move(0, 0)
    screenshot(page, "tradeoff-ci.png", NARROW_VIEWPORT)  # before the checks, so a failure can be looked at

    state = plot_state(page)
    labels = {label["text"]: label["box"] for label in state["labels"]}
    assert sorted(labels) == sorted(LABELS), labels
    names = [t["name"] for t in state["traces"]]
    seeds, quick = "triplet · 32 examples × 1 epoch · mean of seeds (bars: min–max)", "triplet · 256 examples × 1 epoch"
    assert sorted(names) == sorted(["reference", seeds, quick, "Pareto front"]), names
    seeds, quick = names.index(seeds), names.index(quick)
    for name, box in labels.items():  # on screen, inside the figure, clear of every other label
        assert state["plot"]["left"] <= box["left"] and box["right"] <= min(state["plot"]["right"], WIDTH), name
        assert not [other for other, b in labels.items() if other != name and overlap(box, b)], name
    assert "error bars: 95% CI of the mean (bootstrap)" in state["title"]
    ci_bar = state["traces"][quick]["up"][0]  # the quick run's own interval
    assert "95% CI" in hover(page, quick) and "(quick)" in hover(page, quick)
    assert "mean of 2 runs, seeds 0, 1" in hover(page, seeds) and "seeds' min–max" in hover(page, seeds)
    page.locator(".js-plotly-plot").first.screenshot(path=str(SCREENSHOTS / "tradeoff-hover.png"))
    captions = page.locator('[data-testid="stCaptionContainer"]')
    assert captions.filter(has_text="its bars the seeds' lowest and highest scores").is_visible()
    assert captions.filter(has_text="the Train page's \"Available\"").is_visible()  # why this many triplets

    page.locator('[data-testid="stButtonGroup"] button', has_text="SD over targets").click()
    # while Streamlit redraws the chart its element briefly has no layout yet
    page.wait_for_function("() => document.querySelector('.js-plotly-plot')?.layout?.title?.text"
                           "?.includes('standard deviation over targets')")
    wait_idle(page)
    assert_no_errors(page)
    state = plot_state(page)
    assert state["traces"][quick]["up"][0] > 2 * ci_bar  # sd over targets swamps the interval of the mean
    assert sorted(label["text"] for label in state["labels"]) == sorted(LABELS)


# --- Runs & export ------------------------------------------------------------------------------------------------

COLUMNS = ["A before", "A after", "B before", "B after", "A − B, after", "95% CI, p (paired)"]
METRICS = ["P@k", "S@k", "kNN accuracy", "Linear probe"]


def table_cells(page) -> list[list[dict]]:
    """Each row of the comparison table (st.table): its cells' text and right edge in the viewport."""
    return page.evaluate("""() => [...document.querySelectorAll('[data-testid="stTable"] tr')].map(tr =>
        [...tr.querySelectorAll('th, td')].map(c => ({text: c.innerText.trim(), right: c.getBoundingClientRect().right,
                                                       width: c.getBoundingClientRect().width})))""")


def test_runs_comparison_table_shows_every_column_filled_at_1280_px(server, narrow_page, finished_runs):
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
    # Leave the field before the click: its blur hides the form's "Press Enter to submit form" hint and moves the
    # button (11 px here, more while the expander still opens); a blur on the click's own mousedown could move the
    # button away before mouseup, and the click was lost (once in CI: no save, no message).
    page.get_by_role("textbox", name="Tags").blur()
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
    screenshot(page, "runs-compare.png", NARROW_VIEWPORT)


# --- Attention ----------------------------------------------------------------------------------------------------

TEXT = 'the "film" & the <story> was good'
ATTENTION_CHARTS = 7  # per model a head grid, an enlarged head and a summed map; then the ATA bars


def plots(page) -> list[dict]:
    """Each plotly chart on the page: its title, its axes' tick labels as drawn, and its traces' names."""
    return page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
        title: gd._fullLayout.title.text,
        xticks: [...gd.querySelectorAll('.xtick text')].map(t => t.textContent),
        yticks: [...gd.querySelectorAll('.ytick text')].map(t => t.textContent),
        traces: gd._fullData.map(t => t.name)}))""")


def wait_title(page, chart: int, text: str) -> None:
    """Until the chart-th plotly chart's title holds `text` (a timeout fails the test). On a busy machine (a fresh
    clone beside three spinning processes) a rerun's charts arrived one at a time: the first already showed the
    clicked head while the fourth was still another chart, and Streamlit's status widget, which wait_idle watches,
    appears only some time after a run starts."""
    page.wait_for_function("""([chart, text]) => {
        const gd = document.querySelectorAll('.js-plotly-plot')[chart];
        return Boolean(gd && gd._fullLayout && String(gd._fullLayout.title.text).includes(text));
    }""", arg=[chart, text], timeout=60_000)


def click_tile(page, chart: int, head: int, at: float) -> None:
    """Click a head's tile (0-based) in the chart-th plotly chart on the page, `at` of the way along and down it."""
    x, y = page.evaluate("""([chart, head, at]) => {
        const gd = document.querySelectorAll('.js-plotly-plot')[chart], l = gd._fullLayout;
        const t = gd._fullData[head], s = t.z.length, box = gd.getBoundingClientRect();  // the head's heatmap
        return [box.left + l.xaxis._offset + l.xaxis.l2p(t.x0 - 0.5 + at * s),
                box.top + l.yaxis._offset + l.yaxis.l2p(t.y0 - 0.5 + at * s)];
    }""", [chart, head, at])
    page.mouse.click(x, y)


def test_attention_page_tokens_click_to_enlarge_and_layer_choice(server, narrow_page, finished_runs):
    page = narrow_page
    page.goto(server)
    page.get_by_text("demo_corpus").first.wait_for()
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Attention").click()
    page.get_by_role("heading", name="Attention", exact=True).wait_for(timeout=60_000)
    wait_idle(page)
    page.get_by_text("Type a text").click()
    wait_idle(page)
    box = page.get_by_role("textbox", name="Your text")
    box.fill(TEXT)
    box.press("Enter")
    page.get_by_text("Fine-tuned · layer 2, head 1").first.wait_for(timeout=60_000)
    wait_idle(page)
    assert_no_errors(page)

    shown = plots(page)
    assert len(shown) == ATTENTION_CHARTS, [p["title"] for p in shown]
    grid, _, enlarged = shown[:3]
    assert grid["traces"] == ["head 1", "head 2", "heads"]
    tokens = ["[CLS]", "the", '"', "film", '"', "&", "the", "[UNK]", "story", "[UNK]", "was", "good", "[SEP]"]
    assert "Reference · layer 2, head 1" in enlarged["title"]
    assert enlarged["yticks"] == tokens and enlarged["xticks"] == tokens  # the tokenizer's tokens, as typed

    click_tile(page, chart=0, head=1, at=0.3)  # anywhere on the tile, not only its middle
    page.get_by_text("Reference · layer 2, head 2").first.wait_for()
    wait_idle(page)
    wait_title(page, chart=3, text="Fine-tuned · layer 2, head 2")
    assert "Fine-tuned · layer 2, head 2" in plots(page)[3]["title"]  # both models enlarge the same head

    slider = page.get_by_role("slider", name="Layer")
    slider.focus()
    slider.press("ArrowLeft")
    page.get_by_text("stay those of the last layer (2)").wait_for()
    page.get_by_text("Reference · layer 1, head 2").first.wait_for()
    wait_idle(page)
    assert_no_errors(page)
    page.mouse.move(0, 0)
    screenshot(page, "attention-layers.png", NARROW_VIEWPORT)


# --- Maps ---------------------------------------------------------------------------------------------------------

MAP_CHARTS = "[...document.querySelectorAll('.js-plotly-plot')].map(gd => gd._fullLayout)"  # JS: each map's layout
CHARTS_DATA = "[...document.querySelectorAll('.js-plotly-plot')].map(gd => gd._fullData)"  # JS: each map's traces
MARKED = f"() => {CHARTS_DATA}.map(d => d.reduce((n, t) => n + (t.selectedpoints || []).length, 0))"  # selected points


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


def test_maps_box_selection_lists_the_selected_texts(server, page, finished_runs):
    page.goto(server)
    page.get_by_text("demo_corpus").first.wait_for()
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Maps", exact=True).click()
    page.get_by_role("heading", name="Maps", exact=True).wait_for()
    page.locator(".js-plotly-plot").nth(1).wait_for(timeout=180_000)  # both maps: reference and fine-tuned
    wait_idle(page)
    assert_no_errors(page)
    page.get_by_role("radiogroup", name="Colour by").get_by_text(CHANGE, exact=True).click()
    page.wait_for_function(f"() => {MAP_CHARTS}.every(l => l.coloraxis && l.coloraxis.cmax === 1)")
    wait_idle(page)
    page.locator('[data-testid="stCheckbox"]', has_text="Arrows for the texts that moved most").click()
    page.wait_for_function(f"() => {CHARTS_DATA}[1].some(t => t.name.startsWith('moved most'))")
    wait_idle(page)
    assert page.get_by_role("heading", name="Selected texts").count() == 0
    assert page.evaluate(f"() => {MAP_CHARTS}.map(l => l.dragmode)") == ["select", "select"]  # a drag selects

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
    page.wait_for_function(f"() => {MAP_CHARTS}.every(l => l.legend.title.text === 'split')")
    wait_idle(page)
    assert page.get_by_role("heading", name=f"Selected texts · {len(selected)}").count() == 1
    assert page.evaluate(MARKED) == [len(selected), len(selected)]
    assert_no_errors(page)

    page.get_by_role("button", name="Clear the selection").click()
    page.get_by_role("heading", name=f"Selected texts · {len(selected)}").wait_for(state="detached")
    page.wait_for_function(f"() => ({MARKED})().every(n => n === 0)")
    assert_no_errors(page)
