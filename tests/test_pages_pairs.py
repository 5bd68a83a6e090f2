"""Pair corpora in the app, through AppTest on the tiny model: the Corpus page recognises a pasted pair table and
scores STS Spearman, pages that need labels say so in one line, the Train page offers the recipes that train on
pairs and starts a run whose STS change the Trade-off page shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import core.jobs.launch
import core.jobs.worker
from core.analysis.plots import sts_change_figure
from core.analysis.tradeoff import metric_changes
from core.evaluation.headline import HEADLINE
from core.data.content import persist_table
from core.data.kinds import column_settings, load_any
from core.data.pairs import PairColumns, build_pairs
from core.runs.store import RunStore
from core.training.recipes import RECIPES
from tests.conftest import button, no_errors, paste_table, shared_data

WORDS = ("cat", "dog", "bird", "fish", "horse", "cow")


def pair_table(n: int = 40) -> str:
    """n scored and labelled pairs, the first 30 for training, with several distinct scores in both splits."""
    lines = ["sent_a,sent_b,sim,nli,part"]
    for i in range(n):
        score = i % 6
        label = "entailment" if score >= 4 else "neutral" if score >= 2 else "contradiction"
        lines.append(f"a {WORDS[i % 6]} sleeps {i},the {WORDS[(i + score) % 6]} sleeps {i},{score},{label},"
                     f"{'train' if i < 30 else 'test'}")
    return "\n".join(lines) + "\n"


def pasted(text: str) -> str:
    """The same table with the headers a pair corpus is recognised and mapped by."""
    return text.replace("sent_a,sent_b,sim,nli,part", "text1,text2,score,label,split", 1)


def test_pasted_pair_table_shows_pair_report_and_sts_score(app):
    at = paste_table(app, pasted(pair_table()))
    no_errors(at)
    assert at.subheader[0].value == "Validation report · `pasted table`"
    markdown = [m.value for m in at.markdown]
    assert ("**Pair corpus**: 40 pairs, scores 0–5, labels entailment 12 · neutral 14 · contradiction 14"
            in markdown)
    assert {s.label: s.value for s in at.selectbox}.items() >= {
        "Text1 column": "text1", "Text2 column": "text2", "Score column": "score", "Label column": "label",
        "Split column": "split"}.items()
    cards = {m.label: m.value for m in at.metric}
    assert cards["Rows read"] == cards["Pairs kept"] == "40"
    assert "P@16" not in cards
    assert list(at.dataframe[0].value.columns) == ["split", "text1", "text2", "score", "label"]
    assert "30 train and 10 test pairs · split: split column 'split'" in [c.value for c in at.caption]
    assert "40 pairs, scores 0–5" in " ".join(c.value for c in at.sidebar.caption)

    button(at, "Run STS evaluation").click().run()
    no_errors(at)
    spearman = {m.label: m.value for m in at.metric}["STS Spearman"]
    assert -100 <= float(spearman) <= 100
    assert "Run STS evaluation" not in [b.label for b in at.button]  # scored once per corpus and model


def test_the_corpus_page_warns_of_a_few_target_pairs_and_refuses_a_handful(app):
    """Issue 26: STS Spearman over 10 pairs is shown with a warning on its interval; over 9 it is refused."""
    at = paste_table(app, pasted(pair_table()))  # 10 test pairs
    no_errors(at)
    assert any(w.value.replace("\\", "").startswith("STS Spearman is computed on only 10 test pairs, so its 95% "
                                                     "interval is wide: about ±63 points") for w in at.warning)
    at = at.text_area(key="corpus_paste").set_value(pasted(pair_table(39))).run()  # 9 test pairs
    assert not at.exception
    assert [e.value.replace("\\", "") for e in at.error] == [
        "STS Spearman would be computed on 9 test pairs, fewer than the 10 it needs to mean anything; give at least "
        "10 scored pairs the split 'test' in column 'split'."]


def test_the_pair_report_says_which_kept_pairs_go_unused(app):
    lines = pair_table().splitlines()
    lines += [f"a cow runs {i},the cow runs {i},3,neutral,validation" for i in range(5)]
    at = paste_table(app, pasted("\n".join(lines) + "\n"))
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Pairs kept"] == "45"
    assert any(c.value.startswith("30 train and 10 test pairs · 5 kept pairs in a split neither trained on nor "
                                  "evaluated") for c in at.caption)


def test_pair_table_without_scores_says_sts_needs_them(app):
    rows = [",".join(line.split(",")[:2] + line.split(",")[3:]) for line in pasted(pair_table()).splitlines()]
    at = paste_table(app, "\n".join(rows) + "\n")  # the score column left out
    no_errors(at)
    assert any(m.value.startswith("**Pair corpus**: 40 pairs, labels entailment") for m in at.markdown)
    assert "Run STS evaluation" not in [b.label for b in at.button]
    assert at.info[-1].value.startswith("STS Spearman needs a score column")


def test_maps_and_tradeoff_pages_need_labels(app):
    at = paste_table(app, pasted(pair_table()))
    for page, title in (("app_pages/3_Maps.py", "Maps"), ("app_pages/5_Trade-off.py", "Trade-off"),
                        ("app_pages/4_Layers.py", "Layers"), ("app_pages/6_Attention.py", "Attention")):
        at.switch_page(page).run()
        no_errors(at)
        assert [i.value for i in at.info] == [f"The {title} page needs a labelled corpus (text, label); load one "
                                              "on the Corpus page."]


def test_train_page_offers_pair_recipes_and_starts_a_run(app, monkeypatch):
    monkeypatch.setattr(core.jobs.launch, "start",
                        lambda store, run_id: core.jobs.worker.execute(store, run_id) or os.getpid())
    at = paste_table(app, pasted(pair_table()))
    at.switch_page("app_pages/2_Train.py").run()
    no_errors(at)
    assert at.get("button_group")[0].options == ["Supervised"]  # no self-supervised recipe trains on pairs
    recipes = at.selectbox(key="train:recipe:Supervised:pairs")
    assert recipes.options == [r.title for r in RECIPES.values() if "pairs" in r.kinds]
    assert {RECIPES["raoe"].title, RECIPES["cosent"].title} <= set(recipes.options)
    assert RECIPES["triplet"].title not in recipes.options

    recipes.set_value("raoe").run()
    assert "train:k" not in [n.key for n in at.number_input]  # nothing is mined from a pair corpus
    button(at, "Preview examples").click().run()
    no_errors(at)
    frame = at.dataframe[0].value
    assert list(frame.columns) == ["sentence1", "sentence2", "label"]
    assert all(len(label) == 2 and label[1] in (0, 1, 2) for label in frame["label"])  # [s, l]
    assert {m.label for m in at.metric} >= {"Pairs used"}

    at.number_input(key="train:examples").set_value(30).run()
    at.number_input(key="train:batch:sup").set_value(16).run()
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = RunStore().list()
    assert run.status == "done", run.error
    assert run.config["recipe"] == "raoe" and Path(run.config["corpus"]).suffix == ".parquet"
    assert run.metrics_before["sts_spearman"] is not None and run.metrics_after["sts_spearman"] is not None
    assert "**Run** · `" + run.id + "`" in [m.value for m in at.sidebar.markdown]  # a finished run of this corpus

    at.switch_page("app_pages/5_Trade-off.py").run()
    assert not at.exception
    assert "STS Spearman" in [s.value for s in at.subheader]
    table = at.dataframe[0].value
    assert [label.rsplit(" · ", 1)[-1] for label in table["run"]] == [run.id]  # the run's label, its id last
    assert table["run"][0].startswith("raoe · rank margin I 2")
    assert table["change"][0] == round(table["after"][0] - table["before"][0], 1)  # the difference as it reads
    formats = {name: column.get("type_config", {}).get("format")
               for name, column in json.loads(at.dataframe[0].proto.columns).items() if name != "_index"}
    assert formats == {"before": "%.1f", "after": "%.1f", "change": "%+.1f"}  # issue 31, 3.6: one precision
    assert "**On pasted table** · 1 run" in [m.value for m in at.markdown]  # the corpus the chart belongs to


def test_a_change_is_the_difference_of_the_figures_shown_beside_it():
    metric = {m.key: m for m in HEADLINE}
    sts, knn = metric["sts_spearman"], metric["knn_accuracy"]
    assert (sts.text(79.24), sts.text(77.16), sts.change_text(77.16, 79.24)) == ("79.2", "77.2", "+2.0")  # not +2.1
    assert knn.change_text(0.7716, 0.7924) == "+2.0 pp" and knn.shown_change(0.5, 0.5) == 0.0


def test_persisted_pair_table_loads_as_the_same_pairs(tmp_path):
    df = pd.read_csv(pd.io.common.StringIO(pair_table()))
    columns = PairColumns(text1="sent_a", text2="sent_b", score="sim", label="nli", split="part")
    shown = build_pairs(df, columns, name="pasted")
    path = persist_table(df, ["sent_a", "sent_b", "sim", "nli", "part"])
    assert list(pd.read_parquet(path).columns) == ["sent_a", "sent_b", "sim", "nli", "part"]  # the file's own names
    settings = column_settings(shown)
    assert settings == {"text1_col": "sent_a", "text2_col": "sent_b", "score_col": "sim", "label_col": "nli",
                        "split_col": "part"}
    for source in (path, tmp_path / "original.csv"):  # the copy, and the original, whose names no loader guesses
        df.to_csv(tmp_path / "original.csv", index=False)
        loaded = load_any(source, **settings)
        assert loaded.kind == "pairs" and loaded.fingerprint == shown.fingerprint


def test_metric_changes_lists_only_finished_runs_with_sts(tmp_path):
    runs = RunStore()
    with_sts = runs.create("train", {"recipe": "raoe", "corpus": "x"})
    runs.set_metrics_before(with_sts, {"sts_spearman": 40.0})
    runs.mark_done(with_sts, metrics_after={"sts_spearman": 55.5})
    labelled = runs.create("train", {"recipe": "triplet", "corpus": "y"})
    runs.set_metrics_before(labelled, {"polarity": 50.0})
    runs.mark_done(labelled, metrics_after={"polarity": 60.0})
    failed = runs.create("train", {"recipe": "raoe", "corpus": "x"})
    runs.set_metrics_before(failed, {"sts_spearman": 40.0})
    runs.mark_failed(failed, "boom")
    [row] = metric_changes(runs, "sts_spearman")
    assert row["run_id"] == with_sts and row["change"] == pytest.approx(15.5)
    fig = sts_change_figure([row])
    assert [t.name for t in fig.data if t.name] == ["before", "after"]
    assert fig.data[-1].x == (55.5,)


def test_real_sts_benchmark_is_recognised_as_pairs(app):
    text = shared_data("stsb.csv").read_text(encoding="utf-8")
    lines = text.splitlines()
    at = paste_table(app, "\n".join(lines[:200]) + "\n")
    no_errors(at)
    assert any(m.value.startswith("**Pair corpus**: ") for m in at.markdown)


def test_the_sts_axis_ticks_fall_on_round_steps_and_its_split_counts_have_separators(tmp_path):
    """Issue 31, items 2 and 7: a change of 0.17 points drew ticks at 77.225, 77.393, ...; and '2000 'validation''
    lacked its thousands separator."""
    from core.data.pairs import load_pairs

    row = {"run_id": "r1", "name": "raoe", "before": 77.2, "after": 77.37, "change": 0.17}
    fig = sts_change_figure([row])
    low, high = fig.layout.xaxis.range
    assert high - low >= 1.0 and low < 77.2 and high > 77.37 and fig.layout.xaxis.tickformat == ".1f"
    lines = ["text1,text2,score,split"] + [f"a {i} cat,the {i} dog,{i % 5},{'train' if i < 40 else 'test'}"
                                           for i in range(60)] + [f"x {i},y {i},1,validation" for i in range(2000)]
    (tmp_path / "p.csv").write_text("\n".join(lines) + "\n")
    assert any("2,000 'validation'" in w for w in load_pairs(tmp_path / "p.csv").report.warnings)


def test_the_reference_card_names_the_published_figure_of_its_corpus(app):
    """Issue 31, item 3.1: a figure entered on the Corpus page stands under the reference card it belongs to, not only
    under later runs' cards."""
    at = paste_table(app, pasted(pair_table()))
    at.number_input(key="published_value:sts_spearman").set_value(77.6)
    at.text_input(key="published_note").set_value("Reimers & Gurevych 2019").run()
    button(at, "Save figure").click().run()
    button(at, "Run STS evaluation").click().run()
    no_errors(at)
    assert "Published on this test set: STS Spearman 77.6 (Reimers & Gurevych 2019)." in [
        c.value.replace("\\", "") for c in at.caption]


def test_the_sts_chart_draws_each_figure_s_interval():
    """Issue 31, item 3.6: STS has error bars, at each figure's own 95% interval (none where a run holds none)."""
    rows = [{"run_id": "r1", "name": "raoe · r1", "before": 80.0, "after": 81.0, "change": 1.0,
             "before_ci": (78.0, 81.5), "after_ci": (79.5, 82.0)},
            {"run_id": "r2", "name": "cosent · r2", "before": 80.0, "after": 79.0, "change": -1.0,
             "before_ci": None, "after_ci": None}]
    before, after = sts_change_figure(rows).data[-2:]
    assert [list(before.error_x.arrayminus), list(before.error_x.array)] == [[2.0, 0.0], [1.5, 0.0]]
    assert [list(after.error_x.arrayminus), list(after.error_x.array)] == [[1.5, 0.0], [1.0, 0.0]]
    low, high = sts_change_figure(rows).layout.xaxis.range
    assert low < 78.0 and high > 82.0  # the bars inside the axis


def test_the_header_and_sidebar_count_what_the_report_card_counts(app):
    """Issue 31, item 3.2: a pair file with validation rows beside its test rows said '40 pairs' in its header while
    its 'Pairs kept' card said 50; both now give the kept count and how many train or score."""
    lines = pasted(pair_table()).splitlines()
    extra = [f"a spare {i},another {i},2.5,neutral,validation" for i in range(10)]
    at = paste_table(app, "\n".join(lines + extra) + "\n")
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Pairs kept"] == "50"
    assert any(m.value.startswith("**Pair corpus**: 50 pairs (40 in train and test)") for m in at.markdown)
    assert any(c.value.startswith("50 pairs (40 in train and test)") for c in at.sidebar.caption)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_the_sts_chart_gives_each_run_a_row_and_its_legend_clears_the_axis(n):
    """Issue 31, item 3.6, seen in a browser: with two runs only one row was labelled (40 px a row, minus the title
    and a legend at -0.2 that sat on the tick labels)."""
    from core.analysis.plots import STS_LEGEND_PX, STS_ROW_PX

    rows = [{"run_id": f"r{i}", "name": f"run {i}", "before": 77.0, "after": 77.0 + i / 10, "change": i / 10}
            for i in range(n)]
    fig = sts_change_figure(rows)
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert plot_px >= STS_ROW_PX * n
    assert fig.layout.legend.yanchor == "top" and fig.layout.legend.y * plot_px == pytest.approx(-STS_LEGEND_PX)


def test_a_pair_file_in_its_release_s_own_columns_is_mapped_on_the_corpus_page(app):
    """Issue 51: SICK's sentence_A, sentence_B, relatedness_score, entailment_label, SemEval_set (TRAIN / TRIAL /
    TEST) got only text / label / split pickers. The page reads the table as the kind the user picks and offers
    that kind's roles."""
    rows = ["pair_ID,sentence_A,sentence_B,relatedness_score,entailment_label,SemEval_set"]
    for i in range(40):
        label = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")[i % 3]
        part = "TRAIN" if i < 26 else "TRIAL" if i < 28 else "TEST"
        rows.append(f"{i},a {WORDS[i % 6]} sleeps {i},the {WORDS[(i + 1) % 6]} naps {i},{1 + i % 5},{label},{part}")
    at = paste_table(app, "\n".join(rows) + "\n")
    kind = next(r for r in at.radio if r.label == "Read the table as")
    assert kind.value == "labelled"  # by its names alone
    at = kind.set_value("pairs").run()
    assert not at.exception
    assert {s.label for s in at.selectbox} >= {"Text1 column", "Text2 column", "Score column", "Label column"}
    for label, column in (("Text1 column", "sentence_A"), ("Text2 column", "sentence_B"),
                          ("Score column", "relatedness_score"), ("Label column", "entailment_label"),
                          ("Split column", "SemEval_set")):
        at = next(s for s in at.selectbox if s.label == label).set_value(column).run()
    no_errors(at)
    markdown = " ".join(m.value for m in at.markdown)
    assert "**Pair corpus**: 40 pairs" in markdown and "labels entailment" in markdown
    assert "26 train and 12 test pairs" in " ".join(c.value for c in at.caption)
    button(at, "Run STS evaluation").click().run()
    no_errors(at)
    assert -100 <= float({m.label: m.value for m in at.metric}["STS Spearman"]) <= 100


def test_the_trade_off_page_shows_the_sts_runs_of_its_own_corpus_only(app):
    """Issue 51: the Trade-off page on an emotion corpus showed the STS sections of two other corpora (sick_pairs.csv,
    stsb.csv), though its caption said it shows the corpus of its trade-off plot."""
    at = paste_table(app, pasted(pair_table()))
    fingerprint = at.session_state["corpus"].fingerprint
    runs = RunStore()
    for corpus, name in ((fingerprint, "this corpus"), ("0123456789abcdef", "another corpus")):
        run = runs.create("train", {"recipe": "cosent", "corpus": f"{name}.csv"})
        runs.set_metrics_before(run, {"sts_spearman": 40.0})
        runs.set_progress(run, summary={"corpus": {"fingerprint": corpus, "name": name}})
        runs.mark_done(run, metrics_after={"sts_spearman": 50.0})
    at = at.switch_page("app_pages/5_Trade-off.py").run()
    assert not at.exception
    shown = [m.value for m in at.markdown if m.value.startswith("**On ")]
    assert len(shown) == 1 and "1 run" in shown[0], shown
    assert len(metric_changes(runs, "sts_spearman")) == 2
    assert len(metric_changes(runs, "sts_spearman", fingerprint)) == 1
