"""A flag that the corpus's kind would ignore is refused in one line before anything runs (issue 33): --list-shape
on a labelled or pair corpus, --k / --eval-k, --discount and --knn-metric on a pair or list corpus."""

from __future__ import annotations

import json

import pytest

from core.cli import main
from core.runs.store import RunStore
from core.storage import ASSETS

DEMO = str(ASSETS / "demo_corpus.csv")


@pytest.fixture
def pairs(tmp_path) -> str:
    path = tmp_path / "pairs.csv"
    path.write_text("text1,text2,score\n" + "".join(f"first text {i},second text {i},{i % 5}\n" for i in range(200)))
    return str(path)


@pytest.fixture
def lists(tmp_path) -> str:
    path = tmp_path / "lists.csv"
    path.write_text("list_id,rank,text\n" + "".join(f"{i // 3},{i % 3 + 1},member {i}\n" for i in range(300)))
    return str(path)


def _refused(capsys, argv: list[str], *words: str) -> None:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    err = lines[-1]  # after the corpus's own notes (a small test split, a self-taught teacher)
    assert err.startswith("error: ") and "leave the flag out" in err and not any(
        line.startswith("error") for line in lines[:-1]), lines
    for word in words:
        assert word in err, err


@pytest.mark.parametrize("flags,which", [(["--k", "5"], "pairs"), (["--discount", "none"], "pairs"),
                                         (["--knn-metric", "cosine"], "lists"), (["--k", "16"], "lists"),
                                         (["--list-shape", "star"], "pairs"), (["--list-shape", "chain"], "demo")])
def test_evaluate_refuses_a_flag_the_kind_ignores(flags, which, pairs, lists, capsys):
    corpus = {"pairs": pairs, "lists": lists, "demo": DEMO}[which]
    _refused(capsys, ["evaluate", corpus, *flags], flags[0], corpus)


@pytest.mark.parametrize("flags,which", [(["--list-shape", "chain"], "demo"), (["--list-shape", "star"], "pairs"),
                                         (["--eval-k", "8"], "pairs"), (["--discount", "none"], "lists"),
                                         (["--trade-off-only"], "pairs")])
def test_train_refuses_a_flag_the_kind_ignores_before_a_run_row(flags, which, pairs, lists, capsys):
    corpus = {"pairs": pairs, "lists": lists, "demo": DEMO}[which]
    recipe = {"demo": "listmle", "pairs": "cosent", "lists": "listmle"}[which]
    _refused(capsys, ["train", corpus, "--recipe", recipe, *flags], flags[0])
    assert RunStore().list() == []


def test_published_refuses_a_list_shape_for_pairs(pairs, capsys):
    _refused(capsys, ["published", pairs, "--list-shape", "star"], "--list-shape")


@pytest.mark.parametrize("argv", [["maps", "{demo}", "--k", "5", "--out", "{out}"],
                                  ["maps", "{demo}", "--k", "labelled", "--out", "{out}"],
                                  ["quick", "{demo}", "--margin", "0.1", "--k", "5"],
                                  ["runs", "--js"]])
def test_an_abbreviated_flag_is_not_read_as_a_longer_one(argv, tmp_path, capsys):
    """argparse read `maps --k 5` as --kind 5 ("kind must be one of …; got '5'") and `--k labelled` as --kind."""
    with pytest.raises(SystemExit) as exited:
        main([a.format(demo=ASSETS / "demo_corpus.csv", out=tmp_path / "maps") for a in argv])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "unrecognized arguments: --" in err, err
    assert not (tmp_path / "maps").exists()


def test_a_k_larger_than_the_source_pool_is_said_not_cut_in_silence(tmp_path, tiny_model_dir, capsys):
    """With one test text the pool holds 5 training texts: `--k 16` printed P@5 / S@5 without a word."""
    rows = [f"text number {i},{'ab'[i % 2]},{'test' if i == 0 else 'train'}" for i in range(40)]
    (tmp_path / "one.csv").write_text("text,label,split\n" + "\n".join(rows) + "\n")
    assert main(["evaluate", str(tmp_path / "one.csv"), "--model", str(tiny_model_dir), "--k", "16", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["k"] == 5
    assert "P@k and S@k are computed at k = 5, not the 16 asked for" in captured.err
