"""The Generate page in headless Chromium (issue 52): upload a table of queries, point the page at an
OpenAI-compatible server (a loopback one in this process), generate the negatives in a background worker, see the
quality plot (seed 004's Table 4 beside ours), and hand the file to the Train page, where the mgh recipe takes it."""

from __future__ import annotations

import pandas as pd
import pytest

from tests import test_browser
from tests.openai_server import LoopbackServer
from tests.test_browser import assert_no_errors, screenshot, wait_idle
from tests.test_browser_corpora import pick
from tests.test_generate_cli import TOPICS, _negatives_answer

pytestmark = pytest.mark.browser

home, server, browser, page = test_browser.home, test_browser.server, test_browser.browser, test_browser.page
RUN_TIMEOUT_MS = 180_000


def test_negatives_generated_on_the_page_are_plotted_and_handed_to_the_train_page(server, page, tmp_path):
    source = tmp_path / "queries.csv"
    pd.DataFrame({"query": [f"how does {t} work in case {i}" for i in range(2) for t in TOPICS]}).to_csv(
        source, index=False)
    with LoopbackServer(_negatives_answer) as llm:
        page.goto(server)
        page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Generate").click()
        page.get_by_role("heading", name="Generate training data").wait_for()
        wait_idle(page)
        page.get_by_text("Hard negatives (seed 004)").click()
        # The uploader is keyed by the kind: wait for the negatives' one, not just for no run (under load the rerun
        # starts after wait_idle returned, and a file set on the lists' uploader went with it, once in CI)
        page.get_by_text("a table of queries").wait_for()
        wait_idle(page)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(source))
        page.get_by_text("24 rows; columns query.").wait_for()
        page.get_by_text("OpenAI-compatible server").click()
        wait_idle(page)
        for label, value in (("Server URL", llm.url), ("Model name", "tiny")):
            box = page.get_by_role("textbox", name=label)
            box.fill(value)
            box.press("Enter")
            wait_idle(page)
        pick(page, "Difficulty", "PhD")
        page.get_by_role("button", name="Generate").click()
        page.get_by_text("Latest generation: negatives").wait_for(timeout=RUN_TIMEOUT_MS)
        wait_idle(page)
        assert_no_errors(page)
        page.get_by_text("24 rows from 24 source items").wait_for()
        page.get_by_text("test texts of the corpus demo_corpus").wait_for()  # checked against the session's corpus
        page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
        assert "PhD" in " ".join(r.body["messages"][-1]["content"] for r in llm.requests[:1])
    page.mouse.move(0, 0)
    screenshot(page, "generate-negatives.png")
    page.get_by_role("button", name="Train on this").click()
    page.get_by_role("heading", name="Train", exact=True).wait_for()
    wait_idle(page)
    pick(page, "Recipe", "Multi-granularity")
    page.get_by_text("the negatives the Generate page wrote").wait_for()
    assert_no_errors(page)
