"""No phoning home: every page of the app, after a tiny training run so each has content, asks nothing of any host
but the app's own, and the browser console stays free of errors.

Requests to other hosts fail here, as on a machine without internet, and are recorded. Chromium fetches the favicon
outside what Playwright sees, so the page's icon links (and every resource the page loaded) are checked too.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

from core.runs.store import RunStore
from core.training.config import TrainConfig
from tests.test_browser import (  # noqa: F401 (browser, home and server are fixtures)
    STEP_TIMEOUT_MS,
    VIEWPORT,
    assert_no_errors,
    browser,
    home,
    screenshot,
    server,
    wait_idle,
)

pytestmark = pytest.mark.browser

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
PAGES = [  # sidebar link, heading, Plotly figures it shows once done
    ("Home", "ContrastLab", 0),
    ("Corpus", "Corpus", 1),
    ("Train", "Train", 1),
    ("Maps", "Maps", 2),
    ("Layers", "Layers", 2),
    ("Trade-off", "Trade-off", 2),
    ("Attention", "Attention", 3),
    ("Runs & export", "Runs & export", 1),
    ("Definitions", "Definitions", 0),
]
SETTLE_MS = 500  # after a page finished: time for what it loads last (fonts, the favicon) to be asked for


def _local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about") or parts.hostname in LOCAL_HOSTS


@pytest.fixture
def watched(browser):  # noqa: F811 (the fixture imported above)
    """A page whose requests to other hosts fail and are recorded, with its console errors: (page, outside, errors)."""
    context = browser.new_context(viewport=VIEWPORT)
    outside: list[str] = []
    errors: list[str] = []

    def route(r) -> None:
        if _local(r.request.url):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort("internetdisconnected")

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda msg: errors.append(f"{page.url}: {msg.text} ({msg.location['url']})")
            if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    page.set_default_timeout(STEP_TIMEOUT_MS)
    try:
        yield page, outside, errors
    finally:
        context.close()


def _open(page, link: str, heading: str, plots: int) -> None:
    """Click a sidebar link and wait until the page, its figures included, finished."""
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name=link, exact=True).click()
    page.get_by_role("heading", name=heading, exact=True).first.wait_for(timeout=120_000)
    if plots:
        page.locator(".js-plotly-plot").nth(plots - 1).wait_for(timeout=120_000)
    wait_idle(page)
    page.wait_for_timeout(SETTLE_MS)


def _loaded_elsewhere(page) -> list[str]:
    """The page's icon links and loaded resources that are not the app's own."""
    icons = page.eval_on_selector_all("link[rel~='icon']", "els => els.map(e => e.href)")
    resources = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    return [url for url in icons + resources if not _local(url)]


def test_every_page_stays_local_and_error_free_after_a_run(server, watched):  # noqa: F811
    page, outside, errors = watched
    page.goto(server)
    page.get_by_text("demo_corpus").first.wait_for()
    wait_idle(page)
    # A tiny run as a user would start it (no evaluation during training), so the analysis pages have a run to show.
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Train").click()
    page.get_by_role("heading", name="Train", exact=True).wait_for()
    wait_idle(page)
    for label, value in (("Examples (N)", "32"), ("Batch size", "16")):
        box = page.get_by_role("spinbutton", name=label)
        box.fill(value)
        box.press("Enter")
        wait_idle(page)
    page.get_by_role("button", name="Start training").click()
    page.locator('[data-testid="stMetricDelta"]').first.wait_for(timeout=180_000)
    page.get_by_text("Base model, before training").wait_for(state="detached")
    wait_idle(page)

    for link, heading, plots in PAGES:
        _open(page, link, heading, plots)
        assert_no_errors(page)
        outside += _loaded_elsewhere(page)
        page.mouse.move(0, 0)
        screenshot(page, f"offline-{link.split()[0].lower()}.png")
    assert not outside, sorted(set(outside))
    assert not errors, errors


def test_a_run_recorded_without_an_evaluation_history_plots_without_console_errors(server, home, watched,  # noqa: F811
                                                                                   tiny_model_dir):
    """A two-step run whose store row has losses but no evaluation points (as a run recorded before the evaluation
    history was): its loss curve alone, x axis 1 to 2 in whole steps, drew the axis title at y = -Infinity."""
    page, outside, errors = watched
    store = RunStore(home)
    config = TrainConfig(corpus="assets/demo_corpus.csv", model=str(tiny_model_dir), examples=32, batch_size=16)
    run_id = store.create("train", config.to_dict())
    assert store.mark_running(run_id, os.getpid())
    store.add_losses(run_id, [(1, 0.099), (2, 0.101)])
    assert store.mark_done(run_id, {"polarity": 45.0, "similarity": 99.3})
    # A fresh session, so the Runs page shows the newest run, this one. (A deep link to it would also log Streamlit's
    # own 404s, from probing for the app's base path.)
    page.goto(server)
    page.get_by_text("demo_corpus").first.wait_for()
    _open(page, "Runs & export", "Runs & export", 1)
    assert f"run={run_id}" in page.url  # the page selected it
    assert_no_errors(page)
    outside += _loaded_elsewhere(page)
    assert not outside, sorted(set(outside))
    assert not errors, errors
