"""`--kind labelled|pairs|lists` (issue 26): the commands that read a corpus file read it as the kind named, whatever
its column names suggest; a forced kind whose columns are missing, or a kind that is not one, is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from core.cli import main
from core.data.corpus import Corpus, demo_corpus_path
from core.data.kinds import kind_of, load_any
from core.errors import UserError
from core.runs.store import RunStore


@pytest.fixture
def pair_file(tmp_path) -> Path:
    """A pair file whose score takes three values, so it can also be read as texts (text1) labelled by score."""
    n = 120
    path = tmp_path / "pairs.csv"
    pd.DataFrame({"text1": [f"first text number {i}" for i in range(n)],
                  "text2": [f"second text {i}" for i in range(n)],
                  "score": [float(i % 3) for i in range(n)]}).to_csv(path, index=False)
    return path


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_kind_labelled_reads_a_pair_file_as_labelled_texts(pair_file, tiny_model_dir, capsys):
    corpus = load_any(pair_file, text_col="text1", label_col="score", kind="labelled")
    assert isinstance(corpus, Corpus) and corpus.columns.text == "text1" and corpus.columns.label == "score"
    assert len(corpus.classes) == 3 and len(corpus.train_texts) + len(corpus.test_texts) == 120
    assert load_any(pair_file).kind == "pairs"  # without the flag, the columns decide
    args = [str(pair_file), "--kind", "labelled", "--text-col", "text1", "--label-col", "score", "--model",
            str(tiny_model_dir), "--json"]
    assert main(["evaluate", *args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "polarity" in out and out["n_queries"] == len(corpus.test_texts)
    assert main(["layers", *args]) == 0
    assert json.loads(capsys.readouterr().out)["layers"]
    # without --kind the same flags still never turn a pair file into labelled texts
    assert main(["layers", *args[:1], *args[3:]]) == 2
    assert error_line(capsys) == (f"error: Layer-wise kNN accuracy classifies texts by their label, so they need "
                                  f"{kind_of('labelled').title}; {pair_file} is {kind_of('pairs').title}.")


@pytest.mark.parametrize(("kind", "message"), [
    ("lists", "A list file needs a list_id, a rank and a text column"),
    ("pairs", None),
])
def test_a_forced_kind_without_its_columns_is_one_line(kind, message, tmp_path, tiny_model_dir, capsys):
    demo = str(demo_corpus_path())  # text, label
    assert main(["evaluate", demo, "--kind", kind, "--model", str(tiny_model_dir)]) == 2
    err = error_line(capsys)
    assert err.startswith("error: " + (message or "A pair corpus needs a text1 and a text2 column")), err
    assert "the columns are: text, label" in err


def test_a_forced_kind_that_a_command_cannot_use_says_so(pair_file, tiny_model_dir, capsys, tmp_path):
    demo = str(demo_corpus_path())
    assert main(["maps", demo, "--kind", "pairs", "--out", str(tmp_path / "maps")]) == 2
    assert error_line(capsys) == (f"error: Maps colour texts by their label, so they need {kind_of('labelled').title}; "
                                  f"--kind pairs reads {demo} as {kind_of('pairs').title}.")
    assert main(["evaluate", str(pair_file), "--kind", "pairs", "--list-shape", "star"]) == 2
    assert "--kind pairs reads" in error_line(capsys)
    # a quick run's worker reads the file by its columns: a kind forced here could not reach it
    assert main(["quick", str(pair_file), "--kind", "labelled", "--text-col", "text1", "--label-col", "score",
                 "--margin", "0.1"]) == 2
    assert "so --kind labelled cannot apply to it" in error_line(capsys)
    assert RunStore().list() == []


@pytest.mark.parametrize("kind", ["", "Labelled ", "foo", "PAIRS", "list", "labelled\n"])
@pytest.mark.parametrize("command", ["evaluate", "layers", "maps", "quick"])
def test_a_hostile_kind_exits_2_in_one_line(command, kind, pair_file, tmp_path, capsys):
    extra = {"maps": ["--out", str(tmp_path / "maps")], "quick": ["--margin", "0.1"]}.get(command, [])
    assert main([command, str(pair_file), "--kind", kind, *extra]) == 2
    assert error_line(capsys) == (f"error: The corpus kind must be one of labelled, pairs, lists, negatives; got "
                                  f"{kind!r}.")
    with pytest.raises(UserError, match="must be one of labelled, pairs, lists, negatives"):
        load_any(pair_file, kind=kind)
