"""Published figures (docs/definitions.md, Published figures): stored per corpus fingerprint in the home, set and
listed by `python -m core published`, carried by `evaluate`, set on the Corpus page, drawn on the Trade-off plots
and named under a run's metric cards."""

from __future__ import annotations

import json
import math

import pytest
from streamlit.testing.v1 import AppTest

from core.analysis.plots import sts_change_figure, tradeoff_figure
from core.cli import main
from core.data.corpus import demo_corpus_path
from core.errors import UserError
from core.evaluation.published import (
    Published,
    published,
    published_file,
    remove_published,
    set_published,
)
from tests.conftest import button, no_errors, paste_table

FP = "0123456789abcdef"
WORDS = ("cat", "dog", "bird", "fish", "horse", "cow")


def pair_csv(n: int = 40) -> str:
    """n scored pairs, the first 30 for training: 10 test pairs, enough for STS Spearman."""
    lines = ["text1,text2,score,split"]
    for i in range(n):
        score = i % 6
        lines.append(f"a {WORDS[i % 6]} sleeps {i},the {WORDS[(i + score) % 6]} sleeps {i},{score},"
                     f"{'train' if i < 30 else 'test'}")
    return "\n".join(lines) + "\n"


# --- the store -------------------------------------------------------------------------------------------


def test_figures_round_trip_in_the_shown_unit_per_corpus():
    assert published(FP) == {}
    set_published(FP, "sts_spearman", 77.6, "Reimers & Gurevych 2019, table 2")
    set_published(FP, "knn_accuracy", "85", "")  # a string, as the CLI passes it; an accuracy in %
    set_published("fedcba9876543210", "polarity", 63.0)
    figures = published(FP)
    assert list(figures) == ["knn_accuracy", "sts_spearman"]  # HEADLINE order
    assert figures["sts_spearman"] == Published("sts_spearman", 77.6, "Reimers & Gurevych 2019, table 2")
    assert figures["knn_accuracy"].value == pytest.approx(0.85)  # stored as a share, as evaluate stores it
    assert figures["knn_accuracy"].shown == 85.0 and figures["knn_accuracy"].text() == "85.0%"
    assert figures["sts_spearman"].label() == "STS Spearman 77.6 (Reimers & Gurevych 2019, table 2)"
    assert {k: f.value for k, f in published(FP).items()} == {"knn_accuracy": pytest.approx(0.85), "sts_spearman": 77.6}
    set_published(FP, "sts_spearman", -12.5)  # replaces the stored one, note and all
    assert published(FP)["sts_spearman"] == Published("sts_spearman", -12.5, "")
    assert remove_published(FP, "sts_spearman").value == -12.5
    assert list(published(FP)) == ["knn_accuracy"]
    remove_published(FP, "knn_accuracy")
    data = json.loads(published_file().read_text())
    assert data == {"version": 1, "corpora": {"fedcba9876543210": {"polarity": {"value": 63.0, "note": ""}}}}


@pytest.mark.parametrize(("key", "value", "note", "message"), [
    ("nosuch", 1, "", "There is no figure called 'nosuch'; use one of polarity, similarity, knn_accuracy, "
                      "linear_accuracy, rerank_accuracy, sts_spearman, ordering_accuracy, kendall_tau."),
    ("polarity", float("nan"), "", "The published P@k must be a finite number; got nan."),
    ("polarity", "nan", "", "The published P@k must be a finite number; got 'nan'."),
    ("polarity", math.inf, "", "The published P@k must be a finite number; got inf."),
    ("polarity", "-inf", "", "The published P@k must be a finite number; got '-inf'."),
    ("polarity", "abc", "", "The published P@k must be a number such as 77.6; got 'abc'."),
    ("polarity", "", "", "The published P@k must be a number such as 77.6; got ''."),
    ("polarity", "8_5", "", "The published P@k must be a number such as 77.6; got '8_5'."),  # float() reads 85
    ("polarity", True, "", "The published P@k must be a number such as 77.6; got True."),
    ("polarity", None, "", "The published P@k must be a number such as 77.6; got None."),
    ("polarity", [1], "", "The published P@k must be a number such as 77.6; got [1]."),
    ("polarity", 101, "", "The published P@k must lie between 0 and 100, as the cards show it (x100); got 101."),
    ("similarity", -0.1, "", "The published S@k must lie between 0 and 100, as the cards show it (x100); got -0.1."),
    ("linear_accuracy", 100.5, "", "The published Linear probe must lie between 0 and 100%, as the cards show it: "
                                   "85.0 for 85 %; got 100.5."),
    ("sts_spearman", -100.1, "", "The published STS Spearman must lie between -100 and 100, as the cards show it "
                                 "(x100); got -100.1."),
    ("kendall_tau", 1.5, "", "The published Kendall tau must lie between -1 and 1; got 1.5."),
    ("polarity", 50, "x" * 201, "The source note must be at most 200 characters; it has 201."),
    ("polarity", 50, "table 2\nrow 3", "The source note must be one line without control characters (tab, line "
                                       "break, ...); got 'table 2\\nrow 3'."),
    ("polarity", 50, "a\x1b[31mb", "The source note must be one line without control characters (tab, line break, "
                                   "...); got 'a\\x1b[31mb'."),
    ("polarity", 50, 7, "The source note must be text; got 7."),
])
def test_hostile_values_are_refused_in_one_line(key, value, note, message):
    with pytest.raises(UserError) as info:
        set_published(FP, key, value, note)
    assert str(info.value) == message
    assert "\n" not in str(info.value)
    assert not published_file().exists()  # nothing written


def test_the_edges_of_each_range_and_an_empty_note_are_kept():
    for key, value in (("polarity", 0), ("similarity", 100), ("ordering_accuracy", 100.0), ("kendall_tau", -1),
                       ("sts_spearman", -100)):
        set_published(FP, key, value, "")
    assert set(published(FP)) == {"polarity", "similarity", "ordering_accuracy", "kendall_tau", "sts_spearman"}
    assert published(FP)["ordering_accuracy"].value == 1.0


def test_a_corpus_kind_takes_only_the_figures_it_reports():
    with pytest.raises(UserError, match="^A labelled corpus reports polarity, similarity, knn_accuracy, "
                                        "linear_accuracy, not sts_spearman, so it takes no published STS Spearman.$"):
        set_published(FP, "sts_spearman", 70, kind="labelled")
    with pytest.raises(UserError, match="^A pair corpus reports sts_spearman, not polarity"):
        set_published(FP, "polarity", 70, kind="pairs")
    set_published(FP, "kendall_tau", 0.4, kind="lists")


def test_removing_what_is_not_stored_says_so():
    with pytest.raises(UserError, match="^No published P@k is stored for this corpus, so there is nothing to remove."):
        remove_published(FP, "polarity")


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"corpora": []}', b"\xff\xfe\x00garbage"])
def test_an_unreadable_file_is_reported_and_read_as_empty(content):
    published_file().parent.mkdir(parents=True, exist_ok=True)
    published_file().write_bytes(content)
    warnings = []
    assert published(FP, warn=warnings.append) == {}
    assert len(warnings) == 1 and "are unreadable" in warnings[0] and "\n" not in warnings[0]
    set_published(FP, "polarity", 50, warn=warnings.append)  # a save keeps the bad file beside the new one
    assert "kept it as published.json.bad" in warnings[1]
    assert published_file().with_name("published.json.bad").read_bytes() == content
    assert published(FP)["polarity"].value == 50


def test_an_unusable_entry_is_skipped_and_the_rest_kept():
    published_file().parent.mkdir(parents=True, exist_ok=True)
    published_file().write_text(json.dumps({"version": 1, "corpora": {FP: {
        "polarity": {"value": 61.5, "note": "ok"}, "similarity": {"value": 1e9}, "bogus": {"value": 1},
        "kendall_tau": "0.3"}}}))
    warnings = []
    assert published(FP, warn=warnings.append) == {"polarity": Published("polarity", 61.5, "ok")}
    assert warnings == [f"Skipped 3 unusable published figures in {published_file()} ('similarity', 'bogus', "
                        "'kendall_tau'); kept in the file as they are."]


# --- the CLI ---------------------------------------------------------------------------------------------


def test_cli_sets_lists_and_removes(capsys):
    corpus = str(demo_corpus_path())
    assert main(["published", corpus]) == 0
    assert capsys.readouterr().out.startswith(f"no published figures for {corpus} (labelled, fingerprint ")
    assert main(["published", corpus, "--set", "polarity=63.0", "--note", "Seed 000, table 1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "stored: P@k 63.0 (k and discount not recorded; Seed 000, table 1)"
    assert out[2] == "  P@k 63.0 (k and discount not recorded; Seed 000, table 1)"
    assert main(["published", corpus, "--set", "knn_accuracy=85", "--note", ""]) == 0
    capsys.readouterr()
    assert main(["published", corpus, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["kind"] == "labelled" and len(listed["fingerprint"]) == 16
    assert listed["published"] == {
        "polarity": {"value": 63.0, "shown": "63.0", "note": "Seed 000, table 1", "k": None, "discount": None,
                     "label": "P@k 63.0 (k and discount not recorded; Seed 000, table 1)"},
        "knn_accuracy": {"value": 0.85, "shown": "85.0%", "note": "", "label": "kNN accuracy 85.0%"}}
    assert main(["published", corpus, "--remove", "polarity", "--json"]) == 0
    removed = json.loads(capsys.readouterr().out)
    assert removed["removed"] == "P@k 63.0 (k and discount not recorded; Seed 000, table 1)"
    assert list(removed["published"]) == ["knn_accuracy"]
    keys = (listed["content_key"], listed["fingerprint"])  # kept under the rows as a set (issue 51), else the fingerprint
    assert {k: f.value for k, f in published(keys).items()} == {"knn_accuracy": pytest.approx(0.85)}


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "polarity=nan"], "The published P@k must be a finite number; got 'nan'."),
    (["--set", "polarity=abc"], "The published P@k must be a number such as 77.6; got 'abc'."),
    (["--set", "nosuch=1"], "There is no figure called 'nosuch'; use one of polarity, similarity, knn_accuracy, "
                            "linear_accuracy, rerank_accuracy, sts_spearman, ordering_accuracy, kendall_tau."),
    (["--set", "polarity=101"], "The published P@k must lie between 0 and 100, as the cards show it (x100); got 101."),
    (["--set", "polarity"], "--set takes METRIC=VALUE, e.g. --set sts_spearman=77.6; got 'polarity'."),
    (["--set", "polarity="], "The published P@k must be a number such as 77.6; got ''."),
    (["--set", "sts_spearman=70"], "A labelled corpus reports polarity, similarity, knn_accuracy, linear_accuracy, "
                                   "not sts_spearman, so it takes no published STS Spearman."),
    (["--set", "polarity=50", "--note", "a\tb"], "The source note must be one line without control characters (tab, "
                                                 "line break, ...); got 'a\\tb'."),
    (["--note", "x"], "--note is the source of a figure you --set METRIC=VALUE; give it with --set."),
    (["--set", "polarity=50", "--remove", "polarity"], "Give --set or --remove, not both."),
    (["--remove", "nosuch"], "There is no figure called 'nosuch'; use one of polarity, similarity, knn_accuracy, "
                             "linear_accuracy, rerank_accuracy, sts_spearman, ordering_accuracy, kendall_tau."),
    (["--remove", "similarity"], "No published S@k is stored for this corpus, so there is nothing to remove."),
])
def test_cli_refuses_hostile_input_with_one_line_and_exit_2(args, message, capsys):
    assert main(["published", str(demo_corpus_path()), *args]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {message}\n" and captured.out == ""
    assert not published_file().exists()


def test_an_empty_note_is_fine(capsys):
    assert main(["published", str(demo_corpus_path()), "--set", "similarity=46.6", "--note", ""]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "stored: S@k 46.6 (k and discount not recorded)"


def test_evaluate_carries_the_published_figure(tiny_model_dir, tmp_path, capsys):
    corpus = tmp_path / "pairs.csv"
    corpus.write_text(pair_csv())
    args = ["evaluate", str(corpus), "--model", str(tiny_model_dir)]
    assert main([*args, "--json"]) == 0
    assert "published" not in json.loads(capsys.readouterr().out)  # none stored: no key
    assert main(["published", str(corpus), "--set", "sts_spearman=77.6", "--note", "paper"]) == 0
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["published"] == {"sts_spearman": 77.6}
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(" (published: 77.6)")


# --- the pages -------------------------------------------------------------------------------------------


def test_the_corpus_page_sets_lists_and_removes_a_figure(app):
    at = paste_table(app, pair_csv())
    no_errors(at)
    assert [e.label for e in at.expander if e.label == "Published figures"]
    assert at.selectbox(key=next(s.key for s in at.selectbox if s.label == "Figure")).options == ["STS Spearman"]
    at.number_input(key="published_value:sts_spearman").set_value(150.0).run()
    button(at, "Save figure").click().run()
    assert [e.value for e in at.error] == ["The published STS Spearman must lie between -100 and 100, as the cards "
                                           "show it (x100); got 150."]
    at.number_input(key="published_value:sts_spearman").set_value(77.6)
    at.text_input(key="published_note").set_value("Reimers & Gurevych 2019").run()
    button(at, "Save figure").click().run()
    no_errors(at)
    (corpora,) = [json.loads(published_file().read_text())["corpora"]]
    (fingerprint,) = corpora
    assert published(fingerprint) == {"sts_spearman": Published("sts_spearman", 77.6, "Reimers & Gurevych 2019")}
    assert any(m.value.replace("\\", "") == "STS Spearman 77.6 (Reimers & Gurevych 2019)" for m in at.markdown)
    button(at, "Remove").click().run()
    no_errors(at)
    assert published(fingerprint) == {}


def test_a_finished_run_s_cards_name_the_published_figure():
    set_published(FP, "sts_spearman", 77.6, "paper")
    set_published(FP, "kendall_tau", 0.5)  # not a figure this run reports: not named

    def page(fingerprint: str) -> None:
        from ui.run_panel import corpus_fingerprints, metric_cards

        metric_cards({"sts_spearman": 70.0}, {"sts_spearman": 75.0},
                     corpus_fingerprints({"corpus": {"fingerprint": fingerprint}}))

    at = AppTest.from_function(page, args=(FP,)).run()
    assert not at.exception
    assert [c.value.replace("\\", "") for c in at.caption] == ["Published on this test set: STS Spearman 77.6 "
                                                                "(paper)."]
    assert not AppTest.from_function(page, args=("ffffffffffffffff",)).run().caption


# --- the plots -------------------------------------------------------------------------------------------


def test_the_sts_chart_holds_a_dashed_line_at_the_published_value():
    rows = [{"run_id": "r1", "name": "r1", "recipe": "cosent", "before": 70.0, "after": 74.0, "change": 4.0}]
    assert not sts_change_figure(rows).layout.shapes
    fig = sts_change_figure(rows, [Published("sts_spearman", 77.6, "Reimers & Gurevych 2019")])
    (line,) = fig.layout.shapes
    assert (line.x0, line.x1, line.line.dash) == (77.6, 77.6, "dash")
    # issue 31, item 3.6: the label sat inside the plot, over the first run's point; the legend names it instead
    assert not fig.layout.annotations
    assert [t.name for t in fig.data if t.line.dash == "dash"] == [
        "published STS Spearman 77.6 (Reimers &amp; Gurevych 2019)"]


def test_the_trade_off_plot_marks_a_published_point_or_line():
    points = [{"name": "reference model", "label": "reference", "run_id": None, "is_reference": True,
               "polarity": 60.0, "polarity_sd": 20.0, "similarity": 45.0, "similarity_sd": 10.0, "n_queries": 100}]
    both = tradeoff_figure(points, published={"polarity": Published("polarity", 63.0, "Seed 000"),
                                              "similarity": Published("similarity", 46.6, "Seed 000")})
    (mark,) = [t for t in both.data if t.name == "published"]
    assert (mark.x, mark.y, mark.marker.symbol, mark.mode) == ((46.6,), (63.0,), "x", "markers")  # no text by it
    assert not both.layout.shapes and not both.layout.annotations
    only_p = tradeoff_figure(points, published={"polarity": Published("polarity", 63.0)})
    assert [(s.y0, s.y1, s.line.dash) for s in only_p.layout.shapes] == [(63.0, 63.0, "dash")]
    assert "published" not in [t.name for t in only_p.data]
    only_s = tradeoff_figure(points, published={"similarity": Published("similarity", 46.6)})
    assert [(s.x0, s.x1, s.line.dash) for s in only_s.layout.shapes] == [(46.6, 46.6, "dash")]


def test_the_trade_off_page_draws_the_corpus_s_published_point(app):
    from core.data.kinds import load_any

    fingerprint = load_any(demo_corpus_path()).fingerprint  # the app's default corpus
    set_published(fingerprint, "polarity", 63.0, "Seed 000, table 1", k=16, discount="linear")  # the page's k
    set_published(fingerprint, "similarity", 46.6, "Seed 000, table 1", k=16, discount="linear")
    app.run()
    at = app.switch_page("app_pages/5_Trade-off.py").run()
    no_errors(at)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    (mark,) = [t for t in spec["data"] if t.get("name") == "published"]
    assert (mark["x"], mark["y"]) == ([46.6], [63.0])
    assert any(c.value.replace("\\", "") == "Published on this test set (purple): P@16 63.0 (Seed 000, table 1); "
               "S@16 46.6 (Seed 000, table 1)." for c in at.caption)


def test_a_published_figure_stays_with_the_same_rows_in_another_order(tmp_path, capsys):
    """Issue 51: the figure was kept under the corpus fingerprint, which depends on row order, so the same rows in
    another order lost it without a note. It is kept under the rows as a set (content_key); one kept under a
    fingerprint before is still found, and moves to the content key when the corpus's figures change."""
    import pandas as pd

    from core.data.kinds import load_any
    from core.evaluation.published import corpus_keys

    rows = pd.DataFrame({"text": [f"a {'good' if i % 2 else 'bad'} film {i}" for i in range(60)],
                         "label": ["pos" if i % 2 else "neg" for i in range(60)],
                         "split": ["test" if i % 4 == 0 else "train" for i in range(60)]})
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    rows.to_csv(first, index=False)
    rows.iloc[::-1].to_csv(second, index=False)
    assert main(["published", str(first), "--set", "knn_accuracy=85"]) == 0
    capsys.readouterr()
    assert main(["published", str(second), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["published"]["knn_accuracy"]["shown"] == "85.0%"
    a, b = load_any(first), load_any(second)
    assert a.fingerprint != b.fingerprint and a.content_key == b.content_key
    set_published(a.fingerprint, "polarity", 63.0)  # as a figure was kept before there were content keys
    other = rows.assign(text=rows["text"] + "!")
    other.to_csv(tmp_path / "c.csv", index=False)
    c = load_any(tmp_path / "c.csv")
    set_published(c.fingerprint, "similarity", 46.6)
    assert set(published(corpus_keys(c))) == {"similarity"}  # found under the older key
    set_published(corpus_keys(c), "polarity", 60.0)  # and moved to the content key with the next change
    assert set(published(c.content_key)) == {"similarity", "polarity"} and not published(c.fingerprint)
