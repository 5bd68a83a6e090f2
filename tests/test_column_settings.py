"""A run's column settings (issue 31, section 1): a pair or list file whose column names no loader guesses (SICK's
sentence_A, sentence_B, relatedness_score) trains from the CLI as the pages mapped it, with text1_col, text2_col,
score_col, list_col and rank_col; the roles of two kinds, a role of another kind, a column that is not there and
drop_duplicates on pairs are one line and exit 2, before a run exists."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from core.cli import main
from core.data.kinds import column_settings, corpus_kind, load_any
from core.errors import UserError
from core.runs.store import RunStore


@pytest.fixture
def sick_file(tmp_path) -> Path:
    """Pairs under SICK's own column names, which the pair loader does not recognise."""
    n = 120
    path = tmp_path / "sick.csv"
    pd.DataFrame({"pair_ID": range(n), "sentence_A": [f"a man plays the guitar number {i}" for i in range(n)],
                  "sentence_B": [f"someone plays music {i % 7}" for i in range(n)],
                  "relatedness_score": [1 + (i * 7) % 40 / 10 for i in range(n)],
                  "SemEval_set": ["TEST" if i % 4 == 0 else "TRAIN" for i in range(n)]}).to_csv(path, index=False)
    return path


SICK = {"text1_col": "sentence_A", "text2_col": "sentence_B", "score_col": "relatedness_score"}


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_pair_roles_read_a_file_the_loader_would_take_for_labelled_texts(sick_file):
    assert corpus_kind(sick_file) == "labelled"  # by its names alone
    pairs = load_any(sick_file, **SICK)
    assert pairs.kind == "pairs" and len(pairs.train) + len(pairs.test) == 120
    assert column_settings(pairs) == {**SICK, "label_col": None, "split_col": None}


def test_train_takes_the_pair_roles_and_stores_them(sick_file, tiny_model_dir, capsys):
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in SICK.items()]
    assert main(["train", str(sick_file), *flags, "--recipe", "cosent", "--model", str(tiny_model_dir),
                 "--examples", "16", "--batch-size", "8", "--device", "cpu", "--json", "--foreground"]) == 0
    [run] = RunStore().list()
    assert run.status == "done" and {k: run.config[k] for k in SICK} == SICK


@pytest.mark.parametrize(("settings", "said"), [
    ({**SICK, "list_col": "pair_ID"}, "name the columns of a pair corpus and of a list corpus"),
    ({"rank_col": "pair_ID", "kind": "pairs"}, "name columns of another kind of corpus than a pair corpus"),
    ({"text1_col": "sentence_A", "kind": "labelled"}, "name columns of another kind of corpus than a labelled"),
    ({**SICK, "text_col": "sentence_A"}, "text_col names the text column of a labelled corpus"),
    ({**SICK, "score_col": "nope"}, "nope"),
    ({**SICK, "score_col": "sentence_A"}, "sentence_A"),
    ({**SICK, "drop_duplicates": True}, "drop_duplicates drops repeated texts of a labelled corpus"),
])
def test_hostile_column_settings_are_one_line(settings, said, sick_file):
    with pytest.raises(UserError, match=said) as caught:
        load_any(sick_file, **settings)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("flags", "said"), [
    (["--text1-col", "sentence_A", "--text2-col", "sentence_B", "--score-col", "sentence_B"], "sentence_B"),
    (["--text1-col", "sentence_A", "--list-col", "pair_ID"], "a pair corpus and of a list corpus"),
    (["--text1-col", "", "--text2-col", "sentence_B", "--score-col", "relatedness_score"], "text1"),
    (["--text1-col", "sentence_A", "--text2-col", "sentence_A", "--score-col", "relatedness_score"], "identical texts"),
    (["--drop-duplicates", "--text1-col", "sentence_A", "--text2-col", "sentence_B", "--score-col",
      "relatedness_score"], "drop_duplicates"),
])
def test_hostile_column_flags_exit_2_before_a_run_exists(flags, said, sick_file, tiny_model_dir, capsys):
    assert main(["train", str(sick_file), *flags, "--recipe", "cosent", "--model", str(tiny_model_dir),
                 "--device", "cpu"]) == 2
    line = error_line(capsys)
    assert said in line, line
    assert RunStore().list() == []


def _flags(settings: dict[str, str]) -> list[str]:
    return [f"--{name.replace('_', '-')}={value}" for name, value in settings.items()]


def test_evaluate_reads_a_pair_file_in_its_release_s_own_columns(sick_file, tiny_model_dir, capsys):
    """Issue 51: `evaluate` had no --text1-col / --text2-col / --score-col, though `train` had them; SICK in its
    release's columns could not be scored as pairs."""
    import json

    assert main(["evaluate", str(sick_file), *_flags(SICK), "--split-col", "SemEval_set", "--model",
                 str(tiny_model_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kind"] == "pairs" and result["n_pairs"] == 30 and result["sts_spearman"] is not None
    assert main(["published", str(sick_file), *_flags(SICK), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "pairs"


@pytest.mark.parametrize("command", ["layers", "maps", "quick"])
def test_commands_that_need_labels_name_the_pair_file_the_role_flags_read(command, sick_file, tiny_model_dir,
                                                                          tmp_path, capsys):
    extra = {"maps": ["--out", str(tmp_path / "maps")], "quick": ["--margin", "0.1"]}.get(command, [])
    assert main([command, str(sick_file), *_flags(SICK), "--model", str(tiny_model_dir), *extra]) == 2
    assert f"{sick_file} is a pair corpus (text1, text2, score or label)" in error_line(capsys)
    assert RunStore().list() == []
