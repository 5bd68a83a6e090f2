"""A run trained on a generated file names the language model that wrote it: listmle's `--lists FILE` trains on a
list file's lists while the corpus is evaluated (as mgh's `--negatives FILE`), the run's examples record the file's
generation summary, and the model card says it; a file edited after it was written, a sidecar that cannot be read
and a file with no sidecar each say so instead of vouching for a generator."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from core.cli import main
from core.data.provenance import generation_summary, generation_text, sidecar_path
from core.runs.store import RunStore
from core.training.card import contrastlab_card_section
from core.training.config import TrainConfig
from tests.openai_server import LoopbackServer
from tests.test_generate_cli import TOPICS, _list_answer, _one_error


@pytest.fixture(scope="module")
def generated_lists(tmp_path_factory) -> tuple:
    """A chain-list file written by `generate lists` against a loopback server: (its path, the server's URL)."""
    folder = tmp_path_factory.mktemp("generated")
    source = folder / "sentences.csv"
    pd.DataFrame({"text": [f"a short story about {t} number {i} today" for i in range(2) for t in TOPICS]}).to_csv(
        source, index=False)
    out = folder / "lists.csv"
    with LoopbackServer(_list_answer) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTRASTLAB_HOME", str(folder / "home"))
        assert main(["generate", "lists", str(source), "--endpoint", server.url, "--model", "tiny", "--method",
                     "stepwise", "--steps", "4", "--out", str(out), "--json"]) == 0
        return out, server.url


def test_the_summary_names_the_generator_its_method_and_counts(generated_lists):
    out, url = generated_lists
    summary = generation_summary(out)
    assert summary["generator"] == f"tiny at {url}" and summary["kind"] == "lists"
    assert summary["method"] == "stepwise" and summary["steps"] == 4 and summary["items"] == 24
    assert "problem" not in summary
    assert generation_text(summary) == (f"lists.csv, written by tiny at {url} from sentences.csv (step by step "
                                        "(λ = 0), 4 steps; seed 0; 24 lists of 24 sources)")


def test_an_edited_file_or_a_broken_sidecar_says_so(generated_lists, tmp_path):
    out, _url = generated_lists
    copy = tmp_path / "lists.csv"
    copy.write_bytes(out.read_bytes() + b"list999999,1,an added line\n")
    sidecar_path(copy).write_bytes(sidecar_path(out).read_bytes())
    assert generation_summary(copy)["problem"] == "the file was changed after it was generated"
    assert "changed after it was generated" in generation_text(generation_summary(copy))
    sidecar_path(copy).write_text("{not json")
    assert generation_summary(copy) == {"file": "lists.csv",
                                        "problem": "its sidecar lists.csv.generation.json cannot be read "
                                                   "(JSONDecodeError)"}
    sidecar_path(copy).write_text(json.dumps({"kind": "lists"}))  # no generator: unreadable, not a guess
    assert "cannot be read (KeyError)" in generation_summary(copy)["problem"]
    sidecar_path(copy).unlink()
    assert generation_summary(copy) is None


def test_listmle_trains_on_a_lists_file_and_evaluates_the_corpus(generated_lists, tiny_model_dir, contrastlab_home,
                                                                 capsys):
    out, url = generated_lists
    assert main(["train", "assets/demo_corpus.csv", "--recipe", "listmle", "--lists", str(out), "--model",
                 str(tiny_model_dir), "--examples", "16", "--batch-size", "8", "--epochs", "1", "--foreground",
                 "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["status"] == "done" and trained["after"]["kind"] == "labelled"  # the corpus is evaluated
    run = RunStore().get(trained["run_id"])
    examples = run.progress["summary"]["examples"]
    assert examples["lists_file"] == "lists.csv" and examples["available"] == 24 and examples["examples"] == 16
    assert examples["shape"] == "chain" and examples["generated"]["generator"] == f"tiny at {url}"
    card = (Path(run.artefacts["model"]) / "README.md").read_text(encoding="utf-8")
    assert f"- **Training file:** lists.csv, written by tiny at {url} from sentences.csv" in card


def test_a_file_without_a_sidecar_is_named_as_such_on_the_card(tmp_path):
    section = contrastlab_card_section(TrainConfig(corpus="c.csv"), {"examples": {"negatives_file": "n.csv"}})
    assert "- **Training file:** `n.csv`, with no generation record beside it" in section
    assert "Training file" not in contrastlab_card_section(TrainConfig(corpus="c.csv"), {"examples": {}})


@pytest.mark.parametrize("content, match", [
    (None, "does not exist"),
    ("text,label\nfirst,a\nsecond,b\n", "list"),
    ("", "empty"),
])
def test_a_lists_file_that_cannot_train_is_one_line(content, match, tmp_path, tiny_model_dir, contrastlab_home,
                                                    capsys):
    path = tmp_path / "lists.csv"
    if content is not None:
        path.write_text(content)
    code = main(["train", "assets/demo_corpus.csv", "--recipe", "listmle", "--lists", str(path), "--model",
                 str(tiny_model_dir), "--foreground"])
    assert code == 2 and match in _one_error(capsys).lower()


def test_list_size_with_a_lists_file_is_refused(generated_lists, tiny_model_dir, contrastlab_home, capsys):
    out, _url = generated_lists
    code = main(["train", "assets/demo_corpus.csv", "--recipe", "listmle", "--lists", str(out), "--list-size", "4",
                 "--model", str(tiny_model_dir), "--foreground"])
    assert code == 2 and "the lists come from the lists file lists.csv" in _one_error(capsys)
