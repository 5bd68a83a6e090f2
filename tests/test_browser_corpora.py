"""Corpora a user brings and runs on them, in headless Chromium with one server (issue 51): SICK in its release's own
column names read as pairs by picking the kind and mapping its roles; an upload that survives a reload, picked from
the recent uploads; a file that cannot be read, under whose error no other corpus's report stays; two runs evaluated
at k = 16 and k = 8, which the Runs page does not subtract (only the note `python -m core compare` gives); and the
Trade-off page of a labelled corpus, which shows no STS section of a pair run on another corpus. The runs are tiny,
trained once in this process into the server's home."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.data.corpus import demo_corpus_path
from tests import test_browser
from tests.conftest import train_runs
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
    """Choose the option holding `option` in the selectbox called `label`: open it, type to filter its options, take
    the first (typing, not clicking a listed option, which a rerun under load could close before the click)."""
    page.locator('[data-testid="stSelectbox"]', has_text=label).click()
    page.keyboard.type(option)
    page.get_by_role("option").filter(has_text=option).first.wait_for()
    page.keyboard.press("Enter")
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


@pytest.fixture(scope="module")
def finished(home, tiny_model_dir, tmp_path_factory) -> dict[str, str]:
    """Two triplet runs on the demo corpus evaluated at k = 16 and k = 8, and a CoSENT run on a pair file."""
    base = {"corpus": str(demo_corpus_path()), "model": str(tiny_model_dir), "recipe": "triplet", "examples": 32,
            "batch_size": 16}
    pairs = Path(tmp_path_factory.mktemp("pairs")) / "sick_pairs.csv"
    pairs.write_text("text1,text2,score,split\n" + "".join(
        f"a cat sleeps {i},the dog naps {i % 7},{i % 5},{'test' if i % 4 == 0 else 'train'}\n" for i in range(60)))
    k16, k8 = train_runs(home, [{**base, "eval_k": 16}, {**base, "eval_k": 8, "margin": 0.2}],
                         corpus_name="demo_corpus.csv")
    (sts,) = train_runs(home, [{"corpus": str(pairs), "model": str(tiny_model_dir), "recipe": "cosent",
                                "examples": 16, "batch_size": 8}], corpus_name="sick_pairs.csv")
    return {"k16": k16, "k8": k8, "sts": sts}


def test_runs_at_another_k_are_not_subtracted_and_the_page_says_why(server, page, finished):
    page.goto(server)
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Runs & export").click()
    page.get_by_role("heading", name="Compare two runs").wait_for(timeout=60_000)
    wait_idle(page)
    for box, run_id in (("Run A", finished["k16"]), ("Run B", finished["k8"])):
        pick(page, box, run_id)
    note = page.get_by_text("not compared: computed with another k").first
    note.wait_for()
    cells = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stTable"] tr')]
        .map(tr => [...tr.querySelectorAll('th, td')].map(c => c.innerText.trim()))""")
    body = {row[0]: row for row in cells[1:]}
    assert body["P@k"][5] == "–" and body["S@k"][5] == "–", body  # A − B, after: not subtracted
    assert_no_errors(page)
    page.mouse.move(0, 0)
    screenshot(page, "runs-compare-k.png")


def test_the_trade_off_page_of_the_demo_corpus_shows_no_other_corpus_s_sts(server, page, finished):
    page.goto(server)
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Trade-off").click()
    page.get_by_role("heading", name="Trade-off", exact=True).wait_for()
    page.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
    wait_idle(page)
    assert page.get_by_role("heading", name="STS Spearman").count() == 0  # the pair run is on sick_pairs.csv
    assert_no_errors(page)
    page.mouse.move(0, 0)
    screenshot(page, "tradeoff-own-corpus.png")
