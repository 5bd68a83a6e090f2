"""List corpora in the app, through AppTest on the tiny model: the Corpus page recognises a pasted list table, shows
its report and one list, and scores the reference model's ordering; a bad list file is one error line; the Train page
offers listmle only and previews the first list's targets; the Trade-off page shows a list run's ordering before ->
after; a list run started on the Train page shows its ordering on the Runs page and exports; pages that need
labels say so."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import core.jobs.launch
import core.jobs.worker
from core.data.content import persist_table
from core.data.kinds import column_settings, load_any
from core.data.lists import ListColumns, build_lists
from core.evaluation.headline import HEADLINE
from core.evaluation.ordering import evaluate_lists
from core.runs.store import RunStore
from core.training.config import LIST_SHAPES
from core.training.recipes import RECIPES
from tests.conftest import button, no_errors, paste_table, shared_data
from ui.corpus_view import LIST_PREVIEW_COLUMNS
from ui.run_tables import metrics_frame

WORDS = ("cat", "dog", "bird", "fish", "horse", "cow")
HEADER = "qid,rank,passage,fold"  # detected as list id, rank, text and split


def list_table(n: int = 12) -> str:
    """n lists of 4 or 5 members (anchor first), the last 3 for testing."""
    lines = [HEADER]
    for i in range(n):
        word = WORDS[i % 6]
        members = [f"the {word} sleeps {i}", f"a {word} sleeps {i}", f"a {word} runs", "a car drives",
                   f"rain falls {i}"][: 4 + i % 2]
        lines += [f"q{i},{rank},{text},{'train' if i < n - 3 else 'test'}" for rank, text in enumerate(members, 1)]
    return "\n".join(lines) + "\n"


def test_pasted_list_table_shows_report_one_list_and_ordering(app, tiny_model):
    at = paste_table(app, list_table())
    no_errors(at)
    assert at.subheader[0].value == "Validation report · `pasted table`"
    assert "**List corpus**: 12 lists, sizes 4–5, list file" in [m.value for m in at.markdown]
    assert {s.label: s.value for s in at.selectbox}.items() >= {
        "List id column": "qid", "Rank column": "rank", "Text column": "passage", "Split column": "fold"}.items()
    cards = {m.label: m.value for m in at.metric}
    assert (cards["Rows read"], cards["Lists kept"], cards["List sizes"]) == ("54", "12", "4–5")
    assert (cards["Train lists"], cards["Test lists"]) == ("9", "3")
    assert "P@16" not in cards
    assert "9 train and 3 test lists · split: split column 'fold'" in [c.value for c in at.caption]
    preview = at.dataframe[0].value
    assert list(preview["rank"]) == [1, 2, 3, 4] and preview["text"][0] == "the cat sleeps 0"
    at.selectbox(key=next(s.key for s in at.selectbox if s.label == "Preview list")).set_value("q1").run()
    assert list(at.dataframe[0].value["text"]) == ["the dog sleeps 1", "a dog sleeps 1", "a dog runs",
                                                   "a car drives", "rain falls 1"]
    assert "12 lists, sizes 4–5, list file" in [c.value for c in at.sidebar.caption]

    button(at, "Run ordering evaluation").click().run()
    no_errors(at)
    df = pd.read_csv(pd.io.common.StringIO(list_table()))
    expected = evaluate_lists(tiny_model, build_lists(df, ListColumns("qid", "rank", "passage", "fold"), "x"), "m")
    metric = {m.key: m for m in HEADLINE}
    cards = {m.label: m.value for m in at.metric}
    assert cards["Ordering accuracy"] == metric["ordering_accuracy"].text(expected["ordering_accuracy"])
    assert cards["Kendall tau"] == metric["kendall_tau"].text(expected["kendall_tau"])
    intervals = [c.value for c in at.caption if c.value.startswith("95% intervals: ")]
    assert len(intervals) == 1 and "Ordering accuracy " in intervals[0] and " · Kendall tau " in intervals[0]
    assert "Run ordering evaluation" not in [b.label for b in at.button]  # scored once per corpus and model


def test_the_corpus_page_asks_a_list_files_shape_and_a_run_takes_it(app, monkeypatch):
    """Chain by default, one sentence on each shape; a star list file trains and is scored as one."""
    monkeypatch.setattr(core.jobs.launch, "start",  # the job runs to its end in this process
                        lambda store, run_id: core.jobs.worker.execute(store, run_id) or os.getpid())
    at = paste_table(app, list_table())
    shape = next(r for r in at.radio if r.label == "List shape")
    assert shape.options == list(LIST_SHAPES) and shape.value == "chain"
    assert list(shape.proto.captions) == list(LIST_SHAPES.values())
    chain = "For each test chain list, the reference model's cosine of each member to each one after it."
    assert any(c.value.startswith(chain) for c in at.caption)
    shape.set_value("star").run()
    no_errors(at)
    star = "For each test star list, the reference model's cosine of the first member to each other member."
    assert any(c.value.startswith(star) for c in at.caption)
    at.switch_page("app_pages/2_Train.py").run()
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = RunStore().list()
    assert run.status == "done" and run.config["list_shape"] == "star"
    assert run.progress["summary"]["examples"]["shape"] == "star"
    assert run.metrics_after["list_shape"] == "star"


def test_bad_list_file_is_one_error_line(app):
    lines = list_table().splitlines()
    lines[2] = lines[2].replace("q0,2,", "q0,1,", 1)  # two members of list q0 ranked 1
    at = paste_table(app, "\n".join(lines) + "\n")
    assert not at.exception
    assert [e.value for e in at.error] == ["List 'q0' has duplicate ranks (1); each member needs its own rank."]
    assert "Details" not in [e.label for e in at.expander]  # a UserError: no traceback details
    assert not any(m.value.startswith("**List corpus**") for m in at.markdown)  # the previous corpus stays


def test_label_pages_say_they_need_a_labelled_corpus(app):
    at = paste_table(app, list_table())
    for page, title in (("app_pages/3_Maps.py", "Maps"), ("app_pages/5_Trade-off.py", "Trade-off")):
        at.switch_page(page).run()
        no_errors(at)
        assert [i.value for i in at.info] == [f"The {title} page needs a labelled corpus (text, label); load one "
                                              "on the Corpus page."]


def test_train_page_offers_listmle_only_and_previews_the_first_list(app):
    at = paste_table(app, list_table())
    at.switch_page("app_pages/2_Train.py").run()
    no_errors(at)
    assert at.get("button_group")[0].options == ["Supervised"]
    assert at.selectbox(key="train:recipe:Supervised:lists").options == [RECIPES["listmle"].title]
    assert "Lists (N)" in [n.label for n in at.number_input]

    button(at, "Preview examples").click().run()
    no_errors(at)
    cards = {m.label: m.value for m in at.metric}
    assert (cards["Lists used"], cards["List sizes"]) == ("9", "4–5")
    assert cards["Teacher already in list order"].endswith("%")
    [frame] = [d.value for d in at.dataframe]  # the list table only, not the m0..mL + label rows
    assert list(frame.columns) == list(LIST_PREVIEW_COLUMNS.values())
    assert list(frame["rank"]) == [2, 3, 4] and frame["text"][0] == "a cat sleeps 0"
    assert sorted(frame["teacher rank"]) == sorted(frame["target rank"]) == [2, 3, 4]
    assert any("nudged toward the list order by log(w·|gap| + 1)" in c.value for c in at.caption)


def test_train_page_previews_nli_lists_of_real_snli_pairs(app):
    lines = shared_data("snli.csv").read_text(encoding="utf-8").splitlines()
    validation = [line for line in lines[1:] if line.endswith(",validation")][:150]
    test = [line for line in lines[1:] if line.endswith(",test")][:60]
    at = paste_table(app, "\n".join([lines[0], *validation, *test]) + "\n")
    no_errors(at)  # no train rows: the validation pairs train (a warning says so)
    at.switch_page("app_pages/2_Train.py").run()
    recipes = at.selectbox(key="train:recipe:Supervised:pairs")
    assert {RECIPES["listmle"].title, RECIPES["raoe"].title} <= set(recipes.options)
    recipes.set_value("listmle").run()
    button(at, "Preview examples").click().run()
    no_errors(at)
    cards = {m.label: m.value for m in at.metric}
    assert cards["List sizes"] == "5" and int(cards["Lists used"]) > 10
    assert len(at.dataframe) == 1 and list(at.dataframe[0].value["rank"]) == [2, 3, 4, 5]


def test_tradeoff_shows_a_list_runs_ordering_before_and_after(app):
    at = paste_table(app, list_table())
    fingerprint = at.session_state["corpus"].fingerprint
    runs = RunStore()
    listed = runs.create("train", {"recipe": "listmle", "corpus": "x"})
    runs.set_metrics_before(listed, {"ordering_accuracy": 0.4, "kendall_tau": 0.1, "n_lists": 3})
    runs.set_progress(listed, summary={"corpus": {"fingerprint": fingerprint}})
    runs.mark_done(listed, metrics_after={"ordering_accuracy": 0.6, "kendall_tau": 0.35, "n_lists": 3})
    sts = runs.create("train", {"recipe": "raoe", "corpus": "y"})  # on another corpus: not this page's (issue 51)
    runs.set_metrics_before(sts, {"sts_spearman": 40.0})
    runs.mark_done(sts, metrics_after={"sts_spearman": 50.0})
    at.switch_page("app_pages/5_Trade-off.py").run()
    no_errors(at)
    assert [s.value for s in at.subheader] == ["List ordering"]
    table = at.dataframe[-1].value
    assert len(table) == 1 and table["run"][0].startswith("listmle") and table["run"][0].endswith(listed)
    assert table["Ordering accuracy"][0] == "40.0% → 60.0% (+20.0 pp)"
    assert table["Kendall tau"][0] == "0.100 → 0.350 (+0.250)"
    assert at.info[-1].value.startswith("The Trade-off page needs a labelled corpus")

    at.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
    assert "Compare two runs" in [s.value for s in at.subheader]
    frame = metrics_frame([runs.get(listed)])  # the comparison table of the Runs page
    assert frame.loc["Ordering accuracy"].tolist() == pytest.approx([40.0, 60.0])
    assert frame.loc["Kendall tau"].tolist() == pytest.approx([0.1, 0.35])


def test_persisted_list_table_loads_as_the_same_lists():
    df = pd.read_csv(pd.io.common.StringIO(list_table()))
    shown = build_lists(df, ListColumns("qid", "rank", "passage", "fold"), name="pasted")
    settings = column_settings(shown)
    assert settings == {"list_col": "qid", "rank_col": "rank", "text_col": "passage", "split_col": "fold"}
    loaded = load_any(persist_table(df, settings.values()), **settings)
    assert loaded.kind == "lists" and loaded.fingerprint == shown.fingerprint


def test_a_list_run_started_on_the_train_page_shows_ordering_on_runs_and_exports(app, monkeypatch):
    monkeypatch.setattr(core.jobs.launch, "start",  # the job runs to its end in this process
                        lambda store, run_id: core.jobs.worker.execute(store, run_id) or os.getpid())
    at = paste_table(app, list_table())
    at.switch_page("app_pages/2_Train.py").run()
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = RunStore().list()
    assert run.status == "done" and run.config["recipe"] == "listmle" and run.config["list_shape"] == "chain"
    cards = {m.label: m for m in at.metric}
    assert {"Ordering accuracy", "Kendall tau"} <= cards.keys() and "P@16" not in cards
    assert cards["Kendall tau"].delta.startswith(("+", "-"))

    at.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
    table = at.dataframe[0].value.set_index("run")
    assert table.loc[run.id, "Kendall tau"] == pytest.approx(run.metrics_after["kendall_tau"])
    assert "P@k" not in table.columns  # no run here reports it
    button(at, "Export").click().run()
    no_errors(at)
    [export] = (Path(os.environ["CONTRASTLAB_HOME"]) / "exports").iterdir()
    assert {"model.zip", "embeddings.parquet", "config.yaml"} <= {p.name for p in export.iterdir()}
    embedded = pd.read_parquet(export / "embeddings.parquet")
    assert set(embedded["split"]) == {"test"} and "a car drives" in set(embedded["text"])


def test_a_list_file_of_test_lists_only_evaluates_and_says_it_cannot_train(tmp_path, tiny_model_dir, capsys):
    from core.cli import main

    path = tmp_path / "test_lists.csv"
    path.write_text(list_table().replace(",train\n", ",test\n"))
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["n_lists"] == 12
    assert "has no 'train' lists; this corpus can evaluate a model but not train one" in err


def test_list_size_on_a_list_file_is_refused_in_one_line(tmp_path, tiny_model_dir, capsys):
    from core.cli import main

    path = tmp_path / "lists.csv"
    path.write_text(list_table())
    code = main(["train", str(path), "--recipe", "listmle", "--list-size", "5", "--model", str(tiny_model_dir)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and all(line.startswith("warning: ") for line in lines[:-1])  # its few test lists, say
    assert lines[-1].startswith("error: ")
    assert "this list corpus's lists come from its list file, so leave list_size out" in lines[-1]
    assert RunStore().list(with_losses=False) == []


def test_a_list_holding_a_text_twice_is_warned_with_how_ties_count():
    lines = list_table().splitlines()
    lines[2] = lines[2].replace("a cat sleeps 0", "the cat sleeps 0")  # member 2 of list q0 = its anchor
    df = pd.read_csv(pd.io.common.StringIO("\n".join(lines) + "\n"))
    corpus = build_lists(df, ListColumns("qid", "rank", "passage", "fold"), "x")
    assert any(w.startswith("1 list holds the same text twice (or the anchor again)") and "never counts as in exact"
               in w for w in corpus.report.warnings)


@pytest.mark.parametrize("command", ["layers", "maps"])
def test_naming_a_label_column_never_reads_a_list_file_as_labelled_texts(tmp_path, tiny_model_dir, command, capsys):
    """Issue 26: `layers LISTS.csv --label-col rank` classified texts by their rank."""
    from core.cli import main

    path = tmp_path / "lists.csv"
    path.write_text(list_table())
    extra = ["--out", str(tmp_path / "maps")] if command == "maps" else []
    code = main([command, str(path), "--label-col", "rank", "--model", str(tiny_model_dir), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "so they need " in err and "is a list corpus" in err
