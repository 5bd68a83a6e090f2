"""The Corpus page in headless Chromium with files a user brings (issue 51): SICK in its release's own column names
read as pairs by picking the kind and mapping its roles; an upload that survives a reload, picked from the recent
uploads; and a file that cannot be read, under whose error no other corpus's report stays."""

from __future__ import annotations

import pytest

from tests import test_browser
from tests.test_browser import assert_no_errors, screenshot, wait_idle

pytestmark = pytest.mark.browser

home, server, browser, page = test_browser.home, test_browser.server, test_browser.browser, test_browser.page
STANDBY = False  # no run is started from these pages (test_browser.server)

SICK_HEADER = "pair_ID,sentence_A,sentence_B,relatedness_score,entailment_label,SemEval_set"


def sick_rows(n: int = 40) -> str:
    words = ("cat", "dog", "bird", "fish", "horse", "cow")
    rows = [SICK_HEADER]
    for i in range(n):
        label = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")[i % 3]
        part = "TRAIN" if i < 26 else "TRIAL" if i < 28 else "TEST"
        rows.append(f"{i},a {words[i % 6]} sleeps {i},the {words[(i + 1) % 6]} naps {i},{1 + i % 5},{label},{part}")
    return "\n".join(rows) + "\n"


def open_corpus_page(page, server: str) -> None:
    page.goto(server)
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Corpus").click()
    page.get_by_role("heading", name="Corpus", exact=True).wait_for()
    wait_idle(page)


def pick(page, label: str, option: str) -> None:
    """Choose `option` in the selectbox called `label` (a BaseWeb select: open it, click the option)."""
    page.locator('[data-testid="stSelectbox"]', has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def test_sick_in_its_release_columns_is_mapped_as_pairs_and_scored(server, page):
    open_corpus_page(page, server)
    page.get_by_text("Paste a table").click()
    wait_idle(page)
    box = page.get_by_role("textbox", name="Paste a table with a header row (CSV, TSV or semicolon-separated)")
    box.fill(sick_rows())
    box.press("Control+Enter")
    wait_idle(page)
    page.get_by_role("radiogroup", name="Read the table as").get_by_text(  # as pairs, not labelled texts
        "a pair corpus (text1, text2, score or label)").click()
    wait_idle(page)
    for label, column in (("Text1 column", "sentence_A"), ("Text2 column", "sentence_B"),
                          ("Score column", "relatedness_score"), ("Label column", "entailment_label"),
                          ("Split column", "SemEval_set")):
        pick(page, label, column)
    page.get_by_text("26 train and 12 test pairs").first.wait_for()
    page.get_by_role("button", name="Run STS evaluation").click()
    page.locator('[data-testid="stMetricLabel"]', has_text="STS Spearman").wait_for(timeout=120_000)
    wait_idle(page)
    assert_no_errors(page)
    page.mouse.move(0, 0)
    screenshot(page, "corpus-sick-release-columns.png")


def test_an_upload_survives_a_reload_and_a_bad_one_shows_no_other_report(server, page, tmp_path):
    upload = tmp_path / "emotion tweets.csv"
    upload.write_text("text,label\n" + "".join(f"i feel {'glad' if i % 2 else 'cross'} {i},"
                                               f"{'joy' if i % 2 else 'anger'}\n" for i in range(40)))
    open_corpus_page(page, server)
    page.get_by_text("Upload a file").click()
    wait_idle(page)
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
    page.get_by_role("heading", name="Validation report · emotion tweets").wait_for(timeout=60_000)
    wait_idle(page)

    page.reload()  # a new session on the Corpus page: the upload is gone from it, and offered again
    page.get_by_role("heading", name="Corpus", exact=True).wait_for()
    wait_idle(page)
    page.get_by_text("A recent upload").click()
    page.get_by_role("heading", name="Validation report · emotion tweets").wait_for(timeout=60_000)
    wait_idle(page)
    assert_no_errors(page)

    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"text,label\nnot parquet,1\n")
    page.get_by_text("Upload a file").click()
    wait_idle(page)
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(broken))
    page.get_by_text("broken.parquet is not a Parquet file").wait_for()
    wait_idle(page)
    assert page.get_by_role("heading", name="Validation report · emotion tweets").count() == 0
    assert_no_errors(page)
