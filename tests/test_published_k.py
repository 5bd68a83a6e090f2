"""A published P@k / S@k keeps the k and rank discount it was measured at (issue 30), and wherever it is shown beside
one of ours at another k or discount, or with neither recorded, it says so: core.evaluation.published.beside, used by
`evaluate`, a run's metric cards, the Trade-off plot and page; set with `python -m core published --k --discount` and
on the Corpus page."""

from __future__ import annotations

import json
import math

import pytest
from streamlit.testing.v1 import AppTest

from core.analysis.plots import tradeoff_figure
from core.cli import main
from core.data.corpus import demo_corpus_path
from core.errors import UserError, shorten
from core.evaluation.published import Published, beside, published, published_file, set_published, shown_beside
from tests.conftest import button, no_errors

FP = "0123456789abcdef"
P16_UNIFORM = "measured at k = 16 with uniform weights, ours at k = 5 with linear discount"
NOT_RECORDED = "its k and discount were not recorded"


def demo_fingerprint() -> tuple:
    """The keys the demo corpus's published figures are kept under (its content key, then its fingerprint)."""
    from core.data.kinds import load_any
    from core.evaluation.published import corpus_keys

    return corpus_keys(load_any(demo_corpus_path()))


def write_old_file(fingerprint: str, entries: dict) -> None:
    """A published.json as it was written before k and discount were kept."""
    published_file().parent.mkdir(parents=True, exist_ok=True)
    published_file().write_text(json.dumps({"version": 1, "corpora": {fingerprint: entries}}))


# --- the store -------------------------------------------------------------------------------------------


def test_a_p_or_s_figure_keeps_its_k_and_discount():
    set_published(FP, "polarity", 63.0, "Seed 000", k=16, discount="none")
    set_published(FP, "similarity", "46.6", k="16", discount="linear")  # strings, as the CLI passes them
    set_published(FP, "knn_accuracy", 85)
    figures = published(FP)
    assert figures["polarity"] == Published("polarity", 63.0, "Seed 000", 16, "none")
    assert figures["polarity"].label() == "P@16 63.0 (uniform weights; Seed 000)"
    assert figures["similarity"].label() == "S@16 46.6 (linear discount)"
    assert figures["knn_accuracy"].label() == "kNN accuracy 85.0%"
    entries = json.loads(published_file().read_text())["corpora"][FP]
    assert entries == {"polarity": {"value": 63.0, "note": "Seed 000", "k": 16, "discount": "none"},
                       "similarity": {"value": 46.6, "note": "", "k": 16, "discount": "linear"},
                       "knn_accuracy": {"value": 0.85, "note": ""}}  # no k: written as before


def test_what_is_not_recorded_is_labelled_so():
    assert Published("polarity", 63.0).label() == "P@k 63.0 (k and discount not recorded)"
    assert Published("polarity", 63.0, "x", k=16).label() == "P@16 63.0 (discount not recorded; x)"
    assert Published("similarity", 46.6, discount="none").label() == "S@k 46.6 (uniform weights, k not recorded)"


@pytest.mark.parametrize("k", [0, -1, 1.5, "abc", math.nan, math.inf, True, 10 ** 30, "", " ", "1001", "16.0", "1_0",
                               "²", "9" * 5000, [16]])
def test_a_hostile_k_is_refused_in_one_line(k):
    with pytest.raises(UserError) as info:
        set_published(FP, "polarity", 63.0, k=k)
    assert str(info.value) == ("The k of a published P@k must be a whole number from 1 to 1000, the depth it was "
                               f"measured at; got {shorten(k)}.")
    assert "\n" not in str(info.value) and len(str(info.value)) < 250
    assert not published_file().exists()


@pytest.mark.parametrize("discount", ["", "abc", "Linear", 1, True, math.nan])
def test_a_hostile_discount_is_refused_in_one_line(discount):
    with pytest.raises(UserError) as info:
        set_published(FP, "similarity", 46.6, k=16, discount=discount)
    assert str(info.value) == ("The rank discount of a published S@k must be one of linear, none; got "
                               f"{shorten(discount)}.")
    assert not published_file().exists()


@pytest.mark.parametrize("key", ["knn_accuracy", "linear_accuracy", "sts_spearman", "kendall_tau"])
def test_only_p_and_s_take_a_k_or_discount(key):
    for setting in ({"k": 16}, {"discount": "none"}):
        with pytest.raises(UserError) as info:
            set_published(FP, key, 0.5 if key == "kendall_tau" else 50.0, **setting)
        assert str(info.value).endswith("has no k or rank discount: only P@k and S@k are measured at one.")
    assert not published_file().exists()


def test_an_old_file_s_figure_reads_as_not_recorded_and_a_bad_setting_is_skipped():
    write_old_file(FP, {"polarity": {"value": 63.0, "note": "Seed 000"},
                        "similarity": {"value": 46.6, "note": "", "k": 0, "discount": "none"},
                        "sts_spearman": {"value": 77.6, "note": "", "k": 16}})
    warnings = []
    figures = published(FP, warn=warnings.append)
    assert figures == {"polarity": Published("polarity", 63.0, "Seed 000")}
    assert beside(figures["polarity"], 16, "linear") == NOT_RECORDED
    assert warnings == [f"Skipped 2 unusable published figures in {published_file()} ('similarity', "
                        "'sts_spearman'); kept in the file as they are."]


# --- the rule --------------------------------------------------------------------------------------------


def test_beside_gives_the_caveat_unless_k_and_discount_are_ours():
    p16 = Published("polarity", 63.0, "Seed 000", 16, "none")
    assert beside(p16, 16, "none") is None
    assert beside(p16, 5, "linear") == P16_UNIFORM
    assert beside(p16, 16, "linear") == "measured at k = 16 with uniform weights, ours at k = 16 with linear discount"
    assert beside(Published("similarity", 46.6), 16, "linear") == NOT_RECORDED
    assert beside(Published("similarity", 46.6, k=16), 16, "linear") == ("measured at k = 16 with an unrecorded "
                                                                         "discount, ours at k = 16 with linear "
                                                                         "discount")
    assert beside(Published("sts_spearman", 77.6), 5, "linear") is None  # no k: stands as it is
    assert beside(Published("knn_accuracy", 0.85), None, None) is None
    assert shown_beside(p16, 5, "linear") == f"P@16 63.0 (Seed 000) — {P16_UNIFORM}"
    assert shown_beside(p16, 16, "none") == "P@16 63.0 (Seed 000)"


# --- the CLI ---------------------------------------------------------------------------------------------


def test_cli_keeps_every_figure_of_a_repeated_set(capsys):
    """Issue 51: `published ... --set polarity=63.0 --set similarity=46.6` stored only S@16, the last one."""
    corpus = str(demo_corpus_path())
    assert main(["published", corpus, "--set", "polarity=63.0", "--set", "similarity=46.6", "--k", "16",
                 "--discount", "linear", "--note", "Seed 000", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["set"] == ["P@16 63.0 (linear discount; Seed 000)", "S@16 46.6 (linear discount; Seed 000)"]
    assert {key: f["value"] for key, f in listed["published"].items()} == {"polarity": 63.0, "similarity": 46.6}
    assert main(["published", corpus, "--set", "polarity=63.0", "--set", "polarity=64", "--json"]) == 2
    assert capsys.readouterr().err.strip() == "error: --set names 'polarity' twice; give each figure once."


def test_cli_sets_and_lists_a_figure_with_its_k_and_discount(capsys):
    corpus = str(demo_corpus_path())
    assert main(["published", corpus, "--set", "polarity=63.0", "--k", "16", "--discount", "none", "--note",
                 "Seed 000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "stored: P@16 63.0 (uniform weights; Seed 000)"
    assert out[2] == "  P@16 63.0 (uniform weights; Seed 000)"
    assert main(["published", corpus, "--set", "similarity=46.6", "--k", "16", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["set"] == ["S@16 46.6 (discount not recorded)"]
    assert listed["published"]["polarity"] == {"value": 63.0, "shown": "63.0", "note": "Seed 000", "k": 16,
                                               "discount": "none", "label": "P@16 63.0 (uniform weights; Seed 000)"}
    assert (listed["published"]["similarity"]["k"], listed["published"]["similarity"]["discount"]) == (16, None)


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "polarity=63", "--k", "0"], "The k of a published P@k must be a whole number from 1 to 1000, the "
                                           "depth it was measured at; got '0'."),
    (["--set", "polarity=63", "--k=-1"], "The k of a published P@k must be a whole number from 1 to 1000, the depth "
                                         "it was measured at; got '-1'."),
    *[(["--set", "similarity=46", "--k", bad], f"The k of a published S@k must be a whole number from 1 to 1000, the "
                                               f"depth it was measured at; got {bad!r}.")
      for bad in ("1.5", "abc", "nan", "inf", "True", "99999999999999999999", "")],
    (["--set", "polarity=63", "--discount", "abc"], "The rank discount of a published P@k must be one of linear, "
                                                    "none; got 'abc'."),
    (["--set", "polarity=63", "--discount", ""], "The rank discount of a published P@k must be one of linear, none; "
                                                 "got ''."),
    (["--set", "knn_accuracy=85", "--k", "16"], "A published kNN accuracy has no k or rank discount: only P@k and "
                                                "S@k are measured at one."),
    (["--set", "knn_accuracy=85", "--discount", "none"], "A published kNN accuracy has no k or rank discount: only "
                                                         "P@k and S@k are measured at one."),
    (["--k", "16"], "--k and --discount say where a P@k or S@k you --set METRIC=VALUE was measured; give them with "
                    "--set."),
    (["--remove", "polarity", "--discount", "none"], "--k and --discount say where a P@k or S@k you --set "
                                                     "METRIC=VALUE was measured; give them with --set."),
])
def test_cli_refuses_a_hostile_k_or_discount_in_one_line_exit_2(args, message, capsys):
    assert main(["published", str(demo_corpus_path()), *args]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {message}\n" and captured.out == ""
    assert not published_file().exists()


def test_evaluate_at_another_k_prints_the_caveat(tiny_model_dir, capsys):
    corpus = str(demo_corpus_path())
    evaluate = ["evaluate", corpus, "--model", str(tiny_model_dir)]
    assert main(["published", corpus, "--set", "polarity=63.0", "--k", "16", "--discount", "none"]) == 0
    capsys.readouterr()
    assert main([*evaluate, "--k", "5"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("P@5 "))
    assert f" (published: 63.0, {P16_UNIFORM})   S@5 " in line
    assert main([*evaluate, "--k", "5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["published"] == {"polarity": 63.0} and result["published_caveats"] == {"polarity": P16_UNIFORM}
    # at the k and discount it was measured at: no caveat
    assert main([*evaluate, "--k", "16", "--discount", "none", "--json"]) == 0
    assert "published_caveats" not in json.loads(capsys.readouterr().out)
    assert main([*evaluate, "--k", "16", "--discount", "none"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("P@16 "))
    assert " (published: 63.0)   S@16 " in line


def test_evaluate_beside_an_old_figure_says_its_k_was_not_recorded(tiny_model_dir, capsys):
    write_old_file(demo_fingerprint()[1], {"polarity": {"value": 63.0, "note": "Seed 000"}})  # by its fingerprint
    assert main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--k", "5"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("P@5 "))
    assert f" (published: 63.0, {NOT_RECORDED})   S@5 " in line


# --- the pages -------------------------------------------------------------------------------------------


def run_cards(fingerprint: str, k: int, discount: str) -> None:
    from ui.run_panel import corpus_fingerprints, metric_cards

    before = {"polarity": 55.0, "similarity": 44.0, "k": k, "discount": discount}
    metric_cards(before, {**before, "polarity": 60.0}, corpus_fingerprints({"corpus": {"fingerprint": fingerprint}}))


def test_a_run_s_cards_name_the_caveat_of_a_figure_at_another_k():
    set_published(FP, "polarity", 63.0, "Seed 000", k=16, discount="none")
    at = AppTest.from_function(run_cards, args=(FP, 5, "linear")).run()
    assert not at.exception
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert f"Published on this test set: P@16 63.0 (Seed 000) — {P16_UNIFORM}." in captions
    at = AppTest.from_function(run_cards, args=(FP, 16, "none")).run()
    assert "Published on this test set: P@16 63.0 (Seed 000)." in [c.value.replace("\\", "") for c in at.caption]


def test_the_trade_off_plot_names_the_caveat():
    points = [{"name": "reference model", "label": "reference", "run_id": None, "is_reference": True,
               "polarity": 60.0, "polarity_sd": 20.0, "similarity": 45.0, "similarity_sd": 10.0, "n_queries": 100}]
    p16 = Published("polarity", 63.0, "Seed 000", 16, "none")
    line = tradeoff_figure(points, 5, published={"polarity": p16}, discount="linear")
    assert [t.name for t in line.data if (t.name or "").startswith("published")] == [
        f"published P@16 63.0 (Seed 000)<br>{P16_UNIFORM}"]
    same = tradeoff_figure(points, 16, published={"polarity": p16}, discount="none")
    assert [t.name for t in same.data if (t.name or "").startswith("published")] == ["published P@16 63.0 (Seed 000)"]
    both = tradeoff_figure(points, 5, published={"polarity": p16, "similarity": Published("similarity", 46.6)},
                           discount="linear")
    (mark,) = [t for t in both.data if t.name == "published"]
    hover = mark.customdata[0][0].replace("<br>", " ")
    assert f"P@16: {P16_UNIFORM}" in hover and f"S@k: {NOT_RECORDED}" in hover


def test_the_trade_off_page_captions_the_caveat(app):
    fingerprint = demo_fingerprint()  # the app's default corpus
    set_published(fingerprint, "polarity", 63.0, "Seed 000", k=8, discount="none")
    app.run()
    at = app.switch_page("app_pages/5_Trade-off.py").run()  # its k 16, linear discount
    no_errors(at)
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert ("Published on this test set (purple): P@8 63.0 (Seed 000) — measured at k = 8 with uniform weights, ours "
            "at k = 16 with linear discount.") in captions


def test_the_corpus_page_saves_a_p_at_k_with_its_k_and_discount(app):
    app.run()
    at = app.switch_page("app_pages/1_Corpus.py").run()  # the demo corpus
    no_errors(at)
    pick = next(s for s in at.selectbox if s.label == "Figure")
    assert pick.value == "polarity" and at.number_input(key="published_k").value == 16
    assert at.selectbox(key="published_discount").value == "linear"
    pick.set_value("knn_accuracy").run()
    assert not [n for n in at.number_input if n.key == "published_k"]  # no k for a kNN accuracy
    next(s for s in at.selectbox if s.label == "Figure").set_value("polarity").run()
    at.number_input(key="published_value:polarity").set_value(63.0)
    at.number_input(key="published_k").set_value(10)
    at.selectbox(key="published_discount").set_value("none")
    at.text_input(key="published_note").set_value("Seed 000").run()
    button(at, "Save figure").click().run()
    no_errors(at)
    assert published(demo_fingerprint()) == {"polarity": Published("polarity", 63.0, "Seed 000", 10, "none")}
    assert "P@10 63.0 (uniform weights; Seed 000)" in [m.value.replace("\\", "") for m in at.markdown]
