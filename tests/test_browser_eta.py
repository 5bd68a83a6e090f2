"""The Train page's live panel in headless Chromium: a run started there shows its phase in words with step / total
and the whole run's time left, and once done its evaluation curve spans the run, from the before-evaluation at step 0
to the after-evaluation at the last step."""

from __future__ import annotations

import re

import pytest

from core.runs.store import RunStore
from tests.test_browser import (  # noqa: F401 (fixtures)
    assert_no_errors,
    browser,
    home,
    page,
    screenshot,
    server,
    wait_idle,
)

pytestmark = pytest.mark.browser

STEPS, EVAL_EVERY = 60, 20  # long enough for the panel (refreshed every second) to show training under way
TRAINING = re.compile(rf"^training: \d+ / {STEPS} steps · about \d+ (s|min) left · [\d,]+ examples/s$")


def test_live_panel_shows_the_phase_and_the_whole_run_time_left(server, page, home):  # noqa: F811
    page.goto(server)
    page.get_by_text("demo_corpus").first.wait_for()
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Train").click()
    page.get_by_role("heading", name="Train", exact=True).wait_for()
    wait_idle(page)
    for label, value in (("Examples (N)", "32"), ("Batch size", "16"), ("Max steps (0 = all)", str(STEPS)),
                         ("Evaluate every n steps (0 = off)", str(EVAL_EVERY))):
        box = page.get_by_role("spinbutton", name=label)
        box.fill(value)
        box.press("Enter")
        wait_idle(page)
    page.get_by_role("button", name="Start training").click()
    live = page.locator('[data-testid="stProgress"]').get_by_text(TRAINING)
    live.wait_for(timeout=120_000)
    assert_no_errors(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text(re.compile(r"Selected run `?\S+`?: running")).wait_for(timeout=10_000)  # not "queued"
    screenshot(page, "train-live-eta.png")

    page.locator('[data-testid="stMetricDelta"]').first.wait_for(timeout=180_000)  # after vs before: done
    wait_idle(page)
    run = RunStore(home).get(page.url.split("run=")[1].split("&")[0])
    assert run.status == "done"
    assert [point["step"] for point in run.history] == [0, 20, 40, STEPS]  # the last step evaluated once
    assert run.history[-1]["polarity"] == run.metrics_after["polarity"]
    assert_no_errors(page)
    screenshot(page, "train-done-curve.png")
