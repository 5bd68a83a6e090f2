"""Messages that fit who reads them (issue 6): a column that is not found or cannot serve is said with the CLI's flags
on the CLI and with the pickers on the Corpus page, whose note names every column still to pick and goes once they are
picked. Also the page details of issue 8: Home shows the full model path, the Train page's preview shows each text's
label."""

from __future__ import annotations

import pandas as pd
import pytest

from core.cli import main
from core.data.corpus import Columns, build_corpus, detect_columns
from core.data.table import ColumnError
from tests.conftest import button, no_errors, paste_table
from ui.corpus_view import column_advice, pick_note
from ui.layout import escaped

N = 40
TEXTS = [f"sentence number {i} about {'ab'[i % 2]}" for i in range(N)]


def undetected_label() -> pd.DataFrame:
    """A text column, and two whole-number columns that could each be the label."""
    return pd.DataFrame({"text": TEXTS, "score": [i % 2 for i in range(N)], "group": [i % 3 for i in range(N)]})


def undetected_text() -> pd.DataFrame:
    """A label column, and two text columns that could each be the text."""
    return pd.DataFrame({"first": TEXTS, "second": TEXTS[::-1], "label": ["ab"[i % 2] for i in range(N)]})


def undetected_both() -> pd.DataFrame:
    return pd.DataFrame({"first": TEXTS, "second": TEXTS[::-1], "third": ["ab"[i % 2] for i in range(N)]})


def not_found(df: pd.DataFrame) -> ColumnError:
    with pytest.raises(ColumnError) as caught:
        detect_columns(df)
    return caught.value


# ---------------------------------------------------------------- one error, two wordings


def test_label_not_found_cli_names_the_flag_page_the_picker():
    exc = not_found(undetected_label())
    assert str(exc) == ("Could not tell which column holds the labels (columns: text, score, group); "
                        "pass --label-col NAME.")
    assert exc.roles == ("label",) and exc.found == {"text": "text", "label": None, "split": None}
    assert pick_note(exc.roles) == "Could not tell which column holds the labels; pick it below."


def test_text_not_found_is_named_and_both_are_named_when_neither_is_found():
    exc = not_found(undetected_text())
    assert exc.roles == ("text",) and exc.found["label"] == "label"
    assert str(exc).endswith("; pass --text-col NAME.")
    assert pick_note(exc.roles) == "Could not tell which column holds the texts; pick it below."

    both = not_found(undetected_both())
    assert both.roles == ("text", "label")
    assert str(both) == ("Could not tell which columns hold the texts and the labels (columns: first, second, third); "
                         "pass --text-col NAME and --label-col NAME.")
    assert pick_note(both.roles) == "Could not tell which columns hold the texts and the labels; pick them below."
    assert "--" not in pick_note(both.roles)


@pytest.mark.parametrize("columns, flag, advice", [
    (Columns("n", "label", None), "--text-col",
     "holds numbers, not texts; pick the column that holds the texts above."),
    (Columns("text", "score", None), "--label-col",
     "not a class label (e.g. 0.5); pick a column of class names or whole numbers above."),
])
def test_a_picked_column_that_cannot_serve_is_worded_per_front_end(columns, flag, advice):
    df = pd.DataFrame({"text": TEXTS, "label": ["ab"[i % 2] for i in range(N)], "n": range(N),
                       "score": [0.5 * i for i in range(N)]})
    with pytest.raises(ColumnError) as caught:
        build_corpus(df, columns, "t")
    assert f"; pass {flag} with " in str(caught.value)
    assert column_advice(caught.value).endswith(advice) and "--" not in column_advice(caught.value)


def test_cli_says_the_flag(tmp_path, capsys):
    path = tmp_path / "no_label.csv"
    undetected_label().to_csv(path, index=False)
    assert main(["evaluate", str(path)]) == 2
    assert capsys.readouterr().err == ("error: Could not tell which column holds the labels (columns: text, score, "
                                       "group); pass --label-col NAME.\n")


# ---------------------------------------------------------------- the Corpus page


def notes(at) -> list[str]:
    return [i.value for i in at.info if "Could not tell" in i.value]


def test_page_note_names_the_missing_label_without_the_flag_and_goes_once_picked(app):
    at = paste_table(app, undetected_label().to_csv(index=False))
    no_errors(at)
    assert notes(at) == ["Could not tell which column holds the labels; pick it below."]
    table_key = next(s.key for s in at.selectbox if s.key and s.key.startswith("label_col:")).split(":", 1)[1]
    assert at.selectbox(key=f"text_col:{table_key}").value == "text"  # what was found is pre-filled

    at.selectbox(key=f"label_col:{table_key}").set_value("group").run()
    no_errors(at)
    assert notes(at) == [] and not [i for i in at.info if "--" in i.value]
    assert at.session_state["corpus"].columns == Columns("text", "group", None)


def test_page_note_names_the_text_column_and_shrinks_as_columns_are_picked(app):
    at = paste_table(app, undetected_both().to_csv(index=False))
    no_errors(at)
    assert notes(at) == ["Could not tell which columns hold the texts and the labels; pick them below."]
    table_key = next(s.key for s in at.selectbox if s.key and s.key.startswith("text_col:")).split(":", 1)[1]

    at.selectbox(key=f"text_col:{table_key}").set_value("first").run()
    assert notes(at) == ["Could not tell which column holds the labels; pick it below."]
    at.selectbox(key=f"label_col:{table_key}").set_value("third").run()
    no_errors(at)
    assert notes(at) == []
    assert at.session_state["corpus"].columns == Columns("first", "third", None)


def test_page_words_a_column_that_cannot_serve_with_its_pickers(app):
    at = paste_table(app, undetected_label().to_csv(index=False))
    table_key = next(s.key for s in at.selectbox if s.key and s.key.startswith("text_col:")).split(":", 1)[1]
    at.selectbox(key=f"text_col:{table_key}").set_value("score")
    at.selectbox(key=f"label_col:{table_key}").set_value("group").run()
    assert not at.exception
    assert [e.value for e in at.error] == ["Column 'score' holds numbers, not texts; pick the column that holds the "
                                           "texts above."]


# ---------------------------------------------------------------- Home and Train details (issue 8)


def test_home_shows_the_full_model_path(app, tiny_model_dir):
    app.run()
    no_errors(app)
    assert {m.label: m.value for m in app.metric}["Reference model"] == "model"  # the folder name, large
    assert escaped(str(tiny_model_dir)) in [c.value for c in app.caption]  # and the whole path under it


def test_train_preview_shows_each_texts_label(app):
    app.run()
    at = app.switch_page("app_pages/2_Train.py").run()
    button(at, "Preview examples").click().run()
    no_errors(at)
    frame = at.dataframe[0].value
    assert list(frame.columns) == ["anchor", "anchor label", "positive", "positive label", "negative",
                                   "negative label"]
    corpus = at.session_state["corpus"]
    label_of = dict(zip(corpus.train_texts, (corpus.classes[c] for c in corpus.train_labels)))
    assert (frame["anchor label"] == frame["anchor"].map(label_of)).all()
    assert (frame["anchor label"] == frame["positive label"]).all()
    assert (frame["anchor label"] != frame["negative label"]).all()

    at.selectbox(key="train:recipe:Supervised").set_value("contrastive").run()
    button(at, "Preview examples").click().run()
    no_errors(at)
    pairs = at.dataframe[0].value
    assert list(pairs.columns) == ["sentence1", "sentence1 label", "sentence2", "sentence2 label", "label"]
    assert ((pairs["sentence1 label"] == pairs["sentence2 label"]) == (pairs["label"] == 1)).all()

    at.selectbox(key="train:recipe:Supervised").set_value("raoe").run()  # ranked pairs mined from the labels
    button(at, "Preview examples").click().run()
    no_errors(at)
    ranked = at.dataframe[0].value
    assert list(ranked.columns) == ["sentence1", "sentence1 label", "sentence2", "sentence2 label", "label"]
    assert "Pairs used" in [m.label for m in at.metric]


def test_page_validates_a_table_under_a_progress_bar(app, monkeypatch):
    """ui.state hands build_corpus (through the labelled kind) the page's progress bar, so a 100k-row table's stages
    show while it validates."""
    import core.data.corpus
    from ui.feedback import ProgressBar

    seen = []
    real = core.data.corpus.build_corpus

    def spy(*args, progress=None, **kwargs):
        seen.append(progress)
        return real(*args, progress=progress, **kwargs)

    monkeypatch.setattr(core.data.corpus, "build_corpus", spy)
    at = paste_table(app, pd.DataFrame({"text": TEXTS, "label": ["ab"[i % 2] for i in range(N)]}).to_csv(index=False))
    no_errors(at)
    assert seen and all(isinstance(bar, ProgressBar) for bar in seen)
    assert at.session_state["corpus"].name == "pasted table"


def test_the_duplicates_card_counts_the_training_split_and_says_the_others(app):
    from tests.test_corpus import _repeating_table

    at = paste_table(app, _repeating_table().to_csv(index=False))
    no_errors(at)
    card = next(m for m in at.metric if m.label == "Duplicates")
    assert card.value == "6"
    assert card.help.startswith("Repeated texts: 6 in train (4 texts under different labels), 1 in test (0 texts "
                                "under different labels); 18 over the whole file. Kept;")


@pytest.mark.parametrize("bad", ["text,label\n" + "".join(f"only one class {i},a\n" for i in range(20)),  # not built
                                 "text,text\na,b\n"])  # not read: a column name twice
def test_a_table_that_cannot_be_used_shows_no_other_corpus_s_report(app, bad):
    """Issue 51: after an upload that could not be read, the previous corpus's report stayed under the pickers, as if
    it were the new table's."""
    good = pd.DataFrame({"text": TEXTS[:40], "label": ["ab"[i % 2] for i in range(40)]}).to_csv(index=False)
    at = paste_table(app, good)
    no_errors(at)
    assert any(s.value.startswith("Validation report") for s in at.subheader)
    at = at.text_area(key="corpus_paste").set_value(bad).run()
    assert not at.exception and at.error
    assert not any(s.value.startswith("Validation report") for s in at.subheader)
    assert not [m for m in at.metric if m.label == "Rows read"]
