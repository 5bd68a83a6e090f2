"""`python -m core evaluate / layers` on the demo corpus (tiny model) and, marked slow, the published
SST-2 reference row with the packaged all-MiniLM-L6-v2."""

import json

import pytest

from core.cli import main
from core.data.corpus import demo_corpus_path
from core.evaluation.uncertainty import proportion_ci
from tests.conftest import shared_data

EVAL_KEYS = {"polarity", "polarity_sd", "similarity", "similarity_sd", "knn_accuracy", "linear_accuracy",
             "n_queries", "n_pool", "model"}


def test_evaluate_json(tiny_model_dir, capsys):
    assert main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert EVAL_KEYS <= set(out)
    assert 0 <= out["polarity"] <= 100 and 0 <= out["knn_accuracy"] <= 1
    assert out["n_pool"] == min(5 * out["n_queries"], 746)
    # the model is its own reference: S is the mean reference cosine of what it retrieved
    assert out["similarity"] > 50
    # issue 25: `<metric>_ci` beside every figure; P@k's and S@k's are the bootstrap kept under "uncertainty"
    for key in ("polarity", "similarity", "knn_accuracy", "linear_accuracy"):
        low, high = out[f"{key}_ci"]
        assert low <= out[key] <= high, key
    assert out["polarity_ci"] == out["uncertainty"]["polarity_ci"]


def test_evaluate_prints_each_figures_interval(tiny_model_dir, capsys):
    assert main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("95% intervals: P@16 ") and "· Linear probe " in line, line


def test_evaluate_reference_changes_similarity_only(tiny_model_dir, tmp_path, capsys):
    from tests.tiny_model import build_tiny_model

    other = build_tiny_model(tmp_path / "other", layers=1)
    main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json"])
    same = json.loads(capsys.readouterr().out)
    main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--reference", str(other), "--json"])
    cross = json.loads(capsys.readouterr().out)
    assert cross["polarity"] == pytest.approx(same["polarity"])
    assert cross["similarity"] != pytest.approx(same["similarity"])


def test_layers_json(tiny_model_dir, capsys):
    assert main(["layers", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [row["layer"] for row in out["layers"]] == [0, 1, 2]  # embeddings + 2 layers of the tiny BERT
    assert all(0 <= row["knn_accuracy"] <= 1 for row in out["layers"])
    for row in out["layers"]:  # each layer's 95% interval over the 83 test texts
        assert row["knn_accuracy_ci"] == pytest.approx(list(proportion_ci(row["knn_accuracy"], 83)))


@pytest.mark.slow
def test_sst2_reference_row_matches_published(capsys):
    """Seed 000 Table 1: all-MiniLM-L6-v2 on SST-2 validation, k = 16: P 63.0, S 46.6 (our sampling differs)."""
    assert main(["evaluate", str(shared_data("sst2.csv")), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 60 <= out["polarity"] <= 67 and 44 <= out["similarity"] <= 50
    assert out["n_queries"] == 872 and out["n_pool"] == 4360


def test_every_command_s_help_prints():
    """`--help` of each command exits 0: a setting's help holding '%' (RAOE's interval: "12 %") once crashed
    argparse's formatting with a traceback for every `train --help`."""
    from core.cli import build_parser
    commands = build_parser()._subparsers._group_actions[0].choices
    for name in commands:
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args([name, "--help"])
        assert exit_info.value.code == 0, name
