"""The Trade-off plot in headless Chromium at the app's normal width (1280 px), with finished tiny runs: two seeds of
one configuration (drawn as one point, their mean) and a quick run (another budget). Every point carries its label
on the plot, inside it and clear of the other labels; the error bars default to the bootstrap 95% CI and switch to
the standard deviation on request, which widens a run's bars and says so in the title."""

from __future__ import annotations

import pytest

from core.data.corpus import demo_corpus_path
from core.jobs.quick import quick_config
from core.jobs.sweep import grid, sweep_config
from tests import test_browser
from tests.conftest import train_runs
from tests.test_browser import SCREENSHOTS, assert_no_errors, wait_idle

pytestmark = pytest.mark.browser

WIDTH = test_browser.NARROW_WIDTH
home, server, browser, narrow_page = (test_browser.home, test_browser.server, test_browser.browser,
                                      test_browser.narrow_page)  # the shared fixtures
STANDBY = False  # the page keeps a pre-warmed worker waiting; these tests start no run there (test_browser.server)
LABELS = ["reference", "triplet m0.1 · 2 seeds", "triplet m0.5 (quick)"]


def finished_runs(home, model_dir) -> list[str]:
    """Two seeds of a tiny triplet run (a sweep's grid) and a quick run, trained in this process into the server's
    home."""
    corpus = str(demo_corpus_path())
    base = {"corpus": corpus, "model": str(model_dir), "recipe": "triplet", "examples": 32, "batch_size": 16,
            "lr": 5e-3}  # a random tiny model barely moves at the default rate: these runs land apart
    configs = [*grid(sweep_config(base, ["triplet"], [0.1], seeds=2)), quick_config(base, 0.5)]
    return train_runs(home, configs, corpus_name="demo_corpus")


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


def test_points_are_labelled_and_error_bars_switch_at_1280_px(server, narrow_page, home, tiny_model_dir):
    finished_runs(home, tiny_model_dir)
    page = narrow_page
    page.goto(server)
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Trade-off").click()
    page.get_by_role("heading", name="Trade-off", exact=True).wait_for()
    page.locator(".js-plotly-plot .textpoint text").first.wait_for(timeout=120_000)
    wait_idle(page)
    assert_no_errors(page)
    page.mouse.move(0, 0)
    screenshot(page, "tradeoff-ci.png")  # before the checks, so a failure can be looked at

    state = plot_state(page)
    labels = {label["text"]: label["box"] for label in state["labels"]}
    assert sorted(labels) == sorted(LABELS), labels
    assert [t["name"] for t in state["traces"]] == [
        "reference", "triplet · 32 examples × 1 epoch · mean of seeds (bars: min–max)",
        "triplet · 256 examples × 1 epoch", "Pareto front"]
    for name, box in labels.items():  # on screen, inside the figure, clear of every other label
        assert state["plot"]["left"] <= box["left"] and box["right"] <= min(state["plot"]["right"], WIDTH), name
        assert not [other for other, b in labels.items() if other != name and overlap(box, b)], name
    assert "error bars: 95% CI of the mean (bootstrap)" in state["title"]
    ci_bar = state["traces"][2]["up"][0]  # the quick run's own interval
    assert "95% CI" in hover(page, 2) and "(quick)" in hover(page, 2)
    assert "mean of 2 runs, seeds 0, 1" in hover(page, 1) and "seeds' min–max" in hover(page, 1)
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
    assert state["traces"][2]["up"][0] > 2 * ci_bar  # sd over targets swamps the interval of the mean
    assert sorted(label["text"] for label in state["labels"]) == sorted(LABELS)


def screenshot(page, name: str) -> None:
    """The whole page at 1280 px."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": max(900, height)})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))
    page.set_viewport_size({"width": WIDTH, "height": 900})
