"""`python -m core generate` end to end, against a loopback OpenAI-compatible server and a tiny random Llama: the
files it writes train (negatives → `train --recipe mgh --negatives FILE`; lists → `train --recipe listmle`), the
API key is in no file written, hostile flags are one line and exit 2, and the negatives file is a corpus kind with
its own report and reranking figure."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from core.cli import main
from core.data.kinds import corpus_kind, load_any
from core.data.negatives import load_negatives
from core.errors import UserError
from core.runs.store import RunStore
from tests.openai_server import LoopbackServer
from tests.tiny_model import build_tiny_causal_lm

TOPICS = ["cooking", "finance", "sport", "music", "travel", "science", "film", "garden", "history", "weather",
          "games", "health"]
SECRET = "sk-test-never-written"


def _negatives_answer(body: dict, call: int) -> str:
    """A model that writes four graded negatives for the query it is given, in the paper's JSON object."""
    query = re.search(r"Search query: (.*)", body["messages"][-1]["content"]).group(1).strip()
    levels = ("high", "medium", "medium", "low")
    return "Here you go:\n```json\n" + json.dumps({
        "user_query": query, "positive_document": f"all about {query}",
        "hard_negative_document": [{"similarity_level": level, "text": f"{query} note {k}: {'far ' * k}away"}
                                   for k, level in enumerate(levels, 1)]}) + "\n```\nDone."


def _list_answer(body: dict, call: int) -> str:
    """A model that moves a sentence one step: it swaps in the next topic word."""
    sentence = body["messages"][-1]["content"].removeprefix("Sentence: ")
    words = sentence.split()
    for i, word in enumerate(words):
        if word in TOPICS:
            words[i] = TOPICS[(TOPICS.index(word) + 1) % len(TOPICS)]
            break
    return " ".join(words)


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_generated_negatives_train_the_mgh_recipe(tmp_path, tiny_model_dir, contrastlab_home, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    source = tmp_path / "queries.csv"
    pd.DataFrame({"query": [f"how does {t} work in case {i}" for i in range(3) for t in TOPICS]}).to_csv(source,
                                                                                                         index=False)
    out = tmp_path / "negatives.csv"
    with LoopbackServer(_negatives_answer) as server:
        assert main(["generate", "negatives", str(source), "--endpoint", server.url, "--model", "tiny",
                     "--out", str(out), "--json", "--concurrency", "3"]) == 0
        requests = list(server.requests)
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "done" and result["counts"]["rows"] == 36
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in requests)
    for path in [*tmp_path.rglob("*"), *contrastlab_home.rglob("*")]:
        if path.is_file():
            assert SECRET not in path.read_bytes().decode("utf-8", errors="ignore"), path
    assert corpus_kind(out) == "negatives"
    corpus = load_negatives(out)
    assert corpus.rows[0].negatives[0].endswith("note 1: far away") and corpus.report.rows_kept == 36
    record = json.loads((tmp_path / "negatives.csv.generation.json").read_text())
    assert record["generator"] == {"engine": "endpoint", "endpoint": server.url, "model": "tiny"}
    assert main(["train", "assets/demo_corpus.csv", "--recipe", "mgh", "--negatives", str(out), "--model",
                 str(tiny_model_dir), "--examples", "24", "--batch-size", "8", "--epochs", "1", "--foreground",
                 "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["status"] == "done"
    examples = RunStore().get(trained["run_id"]).progress["summary"]["examples"]
    assert examples["negatives_file"] == "negatives.csv" and examples["examples"] == 24
    assert len(examples["band_cosine"]) == 4


def test_generated_lists_train_the_listmle_recipe(tmp_path, tiny_model_dir, contrastlab_home, capsys):
    source = tmp_path / "sentences.csv"
    pd.DataFrame({"text": [f"a short story about {t} number {i} today" for i in range(4) for t in TOPICS]}).to_csv(
        source, index=False)
    out = tmp_path / "lists.csv"
    with LoopbackServer(_list_answer) as server:
        assert main(["generate", "lists", str(source), "--endpoint", server.url, "--model", "tiny", "--method",
                     "stepwise", "--steps", "5", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["counts"]["lists"] == 48 and result["counts"]["sentences"] == 48 * 6
    lists = load_any(out)
    assert lists.kind == "lists" and lists.shape == "chain"
    assert main(["train", str(out), "--recipe", "listmle", "--model", str(tiny_model_dir), "--epochs", "1",
                 "--foreground", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["status"] == "done"
    assert trained["after"]["kind"] == "lists" and 0.0 <= trained["after"]["ordering_accuracy"] <= 1.0


def test_a_local_model_folder_writes_lists(tmp_path, contrastlab_home, capsys):
    lm = build_tiny_causal_lm(tmp_path / "lm", stop_bias=0.04)
    source = tmp_path / "s.csv"
    source.write_text("text\nthe market price of fish fell this year.\n")
    out = tmp_path / "lists.parquet"
    assert main(["generate", "lists", str(source), "--model", str(lm), "--method", "stepwise", "--steps", "4",
                 "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["generator"]["engine"] == "local" and result["counts"]["finished"] == 1
    assert pd.read_parquet(out)["rank"].tolist()[0] == 1


@pytest.mark.parametrize("flags, match", [
    (["--steps", "0"], "--steps"), (["--steps", "many"], "--steps"), (["--lambda", "nan"], "--lambda"),
    (["--lambda", "1e400"], "--lambda"), (["--concurrency", "0"], "--concurrency"),
    (["--concurrency", "100000"], "--concurrency"), (["--method", "beam"], "--method"),
    (["--limit", "-1"], "--limit"), (["--seed", "x"], "--seed"),
])
def test_hostile_generate_flags_are_one_line(flags, match, tmp_path, capsys):
    source = tmp_path / "s.csv"
    source.write_text("text\na sentence\n")
    code = main(["generate", "lists", str(source), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                 "--method", "stepwise", "--out", str(tmp_path / "o.csv"), *flags])
    assert code == 2 and match in _one_error(capsys)


@pytest.mark.parametrize("argv, match", [
    (["generate", "rows", "S.csv", "--model", "m", "--out", "o.csv"], "lists or negatives"),
    (["generate", "lists", "S.csv", "--out", "o.csv"], "--model"),
    (["generate", "lists", "S.csv", "--endpoint", "ftp://x", "--model", "m", "--out", "o.csv"], "http"),
    (["generate", "lists", "S.csv", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", "o.txt"], ".csv"),
    (["generate", "lists", "S.csv", "--model", "/nonexistent/folder", "--out", "o.csv"], "language model folder"),
    (["generate", "lists", "S.csv", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", "o.csv"],
     "local model folder"),
    (["generate", "negatives", "EMPTY.csv", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", "o.csv"],
     "is empty"),
    (["generate", "negatives", "S.csv", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", "o.csv",
      "--difficulty", "toddler"], "difficulty"),
    (["generate", "negatives", "S.csv", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", "o.csv"],
     "Could not reach"),
])
def test_generate_refuses_bad_input_in_one_line(argv, match, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "S.csv").write_text("query\nwhat is a cat\n")
    (tmp_path / "EMPTY.csv").write_text('query\n""\n')
    assert main(argv) == 2
    assert match in _one_error(capsys)
    assert not (tmp_path / "o.csv").exists()


def _negatives_table(n: int = 30) -> pd.DataFrame:
    return pd.DataFrame({"query": [f"query {TOPICS[i % 12]} {i}" for i in range(n)],
                         "positive": [f"the answer on {TOPICS[i % 12]} {i}" for i in range(n)],
                         **{f"negative_{k}": [f"negative {k} on {TOPICS[i % 12]} {i}" for i in range(n)]
                            for k in range(1, 5)},
                         "split": ["train" if i < 20 else "test" for i in range(n)]})


def test_a_negatives_file_reports_its_suspect_rows_and_is_scored_by_reranking(tmp_path, tiny_model_dir, capsys):
    table = _negatives_table()
    table.loc[0, "negative_2"] = table.loc[0, "negative_1"].upper()  # two equal negatives (after case)
    table.loc[1, "negative_4"] = table.loc[1, "positive"]  # a negative equal to its positive
    table.loc[2, "negative_3"] = ""  # dropped
    table.loc[25, "query"] = table.loc[5, "query"]  # a test query that is also a training query
    path = tmp_path / "negatives.csv"
    table.to_csv(path, index=False)
    corpus = load_negatives(path)
    r = corpus.report
    assert (r.rows_kept, r.empty, r.repeated, r.equal_positive, r.leaked) == (29, 1, 1, 1, 1)
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (19, 10, "test")
    assert any("equal to their positive" in w for w in r.warnings)
    assert len(load_negatives(path, drop_leaked=True).test) == 9
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kind"] == "negatives" and result["n_queries"] == 10
    low, high = result["rerank_accuracy_ci"]
    assert 0 <= low <= result["rerank_accuracy"] <= high <= 1


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.drop(columns=["negative_3"]), "negative_1..negative_4"),
    (lambda t: t.head(5), "complete rows"),
    (lambda t: t.assign(negative_1=""), "is empty"),
])
def test_a_negatives_file_that_cannot_train_is_one_line(edit, match, tmp_path):
    path = tmp_path / "n.csv"
    edit(_negatives_table()).to_csv(path, index=False)
    with pytest.raises(UserError, match=match) as caught:
        load_negatives(path)
    assert len(str(caught.value).splitlines()) == 1


def test_two_models_on_a_negatives_file_are_compared_query_by_query(tmp_path, tiny_model_dir, tiny_model):
    """Reranking accuracy keeps each query's outcome, so two models on the same rows get a paired difference; the same
    rows in another order are the same items."""
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.evaluation.paired import compare
    from core.models.loading import load_model
    from tests.tiny_model import build_tiny_model

    table = _negatives_table(60).assign(split=lambda t: ["train" if i < 30 else "test" for i in range(60)])
    path, shuffled = tmp_path / "n.csv", tmp_path / "shuffled.csv"
    table.to_csv(path, index=False)
    table.sample(frac=1.0, random_state=1).to_csv(shuffled, index=False)
    other = load_model(str(build_tiny_model(tmp_path / "cls", pooling="cls")), device="cpu")
    a = evaluate_corpus(tiny_model, tiny_model, load_negatives(path))
    b = evaluate_corpus(other, other, load_negatives(shuffled))
    differences, notes = compare(a, b)
    (rerank,) = [d for d in differences if d.name == "rerank_accuracy"]
    assert rerank.n == 30 and rerank.delta == pytest.approx(b["rerank_accuracy"] - a["rerank_accuracy"])
    assert rerank.ci_low <= rerank.delta <= rerank.ci_high and rerank.mcnemar_p is not None


def test_written_texts_that_are_test_texts_of_a_corpus_are_counted(tmp_path, contrastlab_home, capsys):
    corpus = tmp_path / "corpus.csv"
    pd.DataFrame({"text": [f"Question on {TOPICS[i % 12]} {i}" for i in range(40)],
                  "label": [TOPICS[i % 3] for i in range(40)],
                  "split": ["test" if i % 4 == 0 else "train" for i in range(40)]}).to_csv(corpus, index=False)
    source = tmp_path / "queries.csv"
    queries = ["QUESTION  on cooking 0", "question on finance 1", "something else"]  # the first is a test text
    pd.DataFrame({"query": queries}).to_csv(source, index=False)
    out = tmp_path / "n.csv"
    with LoopbackServer(_negatives_answer) as server:
        assert main(["generate", "negatives", str(source), "--endpoint", server.url, "--model", "m", "--out",
                     str(out), "--check-against", str(corpus), "--json"]) == 0
    leak = json.loads(capsys.readouterr().out)["counts"]["leakage"]
    assert (leak["leaked"], leak["examples"], leak["corpus"]) == (1, ["QUESTION  on cooking 0"], "corpus")
    assert json.loads((tmp_path / "n.csv.generation.json").read_text())["counts"]["leakage"] == leak
    with LoopbackServer(_negatives_answer) as server:
        assert main(["generate", "negatives", str(source), "--endpoint", server.url, "--model", "m", "--out",
                     str(tmp_path / "m.csv"), "--check-against", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv" in _one_error(capsys) and not (tmp_path / "m.csv").exists()
