"""The Attention page in headless Chromium at the app's normal width (1280 px), with a finished run: a typed text
with markup characters shows its tokens literally on the enlarged head's axes, a click on a head's tile enlarges
that head, another layer can be chosen (with the note that ATA weights stay last-layer), and a screenshot is taken."""

from __future__ import annotations

import pytest

import core.jobs.worker
from core.data.corpus import demo_corpus_path
from core.runs.store import RunStore
from core.training.config import TrainConfig
from tests import test_browser
from tests.test_browser import SCREENSHOTS, assert_no_errors, wait_idle

pytestmark = pytest.mark.browser

WIDTH = test_browser.NARROW_WIDTH
home, server, browser, narrow_page = (test_browser.home, test_browser.server, test_browser.browser,
                                      test_browser.narrow_page)  # the shared fixtures
TEXT = 'the "film" & the <story> was good'
CHARTS = 7  # per model a head grid, an enlarged head and a summed map; then the ATA bars


def finished_run(home, model_dir) -> str:
    """A small triplet run on the demo corpus, trained in this process into the server's home."""
    store = RunStore(home)
    config = TrainConfig(corpus=str(demo_corpus_path()), model=str(model_dir), reference=str(model_dir), examples=32,
                         batch_size=16).to_dict()
    run_id = store.create("train", config, corpus_name="demo_corpus")
    core.jobs.worker.execute(store, run_id)
    assert store.get(run_id).status == "done", store.get(run_id).error
    return run_id


def plots(page) -> list[dict]:
    """Each plotly chart on the page: its title, its axes' tick labels as drawn, and its traces' names."""
    return page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
        title: gd._fullLayout.title.text,
        xticks: [...gd.querySelectorAll('.xtick text')].map(t => t.textContent),
        yticks: [...gd.querySelectorAll('.ytick text')].map(t => t.textContent),
        traces: gd._fullData.map(t => t.name)}))""")


def click_tile(page, chart: int, head: int, at: float) -> None:
    """Click a head's tile (0-based) in the chart-th plotly chart on the page, `at` of the way along and down it."""
    x, y = page.evaluate("""([chart, head, at]) => {
        const gd = document.querySelectorAll('.js-plotly-plot')[chart], l = gd._fullLayout;
        const t = gd._fullData[head], s = t.z.length, box = gd.getBoundingClientRect();  // the head's heatmap
        return [box.left + l.xaxis._offset + l.xaxis.l2p(t.x0 - 0.5 + at * s),
                box.top + l.yaxis._offset + l.yaxis.l2p(t.y0 - 0.5 + at * s)];
    }""", [chart, head, at])
    page.mouse.click(x, y)


def test_attention_page_tokens_click_to_enlarge_and_layer_choice(server, narrow_page, home, tiny_model_dir):
    finished_run(home, tiny_model_dir)
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
    assert len(shown) == CHARTS, [p["title"] for p in shown]
    grid, _, enlarged = shown[:3]
    assert grid["traces"] == ["head 1", "head 2", "heads"]
    tokens = ["[CLS]", "the", '"', "film", '"', "&", "the", "[UNK]", "story", "[UNK]", "was", "good", "[SEP]"]
    assert "Reference · layer 2, head 1" in enlarged["title"]
    assert enlarged["yticks"] == tokens and enlarged["xticks"] == tokens  # the tokenizer's tokens, as typed

    click_tile(page, chart=0, head=1, at=0.3)  # anywhere on the tile, not only its middle
    page.get_by_text("Reference · layer 2, head 2").first.wait_for()
    wait_idle(page)
    assert "Fine-tuned · layer 2, head 2" in plots(page)[3]["title"]  # both models enlarge the same head

    slider = page.get_by_role("slider", name="Layer")
    slider.focus()
    slider.press("ArrowLeft")
    page.get_by_text("stay those of the last layer (2)").wait_for()
    page.get_by_text("Reference · layer 1, head 2").first.wait_for()
    wait_idle(page)
    assert_no_errors(page)
    page.mouse.move(0, 0)
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": height})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "attention-layers.png"))
