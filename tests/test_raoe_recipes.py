"""RAOE as recipes: (s, l) pairs from a pair corpus or mined from labels, the teacher choice, a run on a pair corpus
reporting STS Spearman before and after, the Train page offering it, and one-line refusals for what cannot work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.cli import main
from core.data.corpus import demo_corpus_path, load_corpus
from core.data.pairs import load_pairs
from core.errors import UserError
from core.models.encode import encode
from core.runs.store import RunStore
from core.training.config import TrainConfig
from core.training.raoe import ranked_pairs
from core.training.recipes import get_recipe

WORDS = ["cat", "dog", "car", "tree", "house", "river", "music", "bread", "stone", "cloud"]


def pair_file(tmp_path: Path, labels: bool = False) -> Path:
    """40 train and 100 test pairs (enough for STS Spearman without a small-sample warning, issue 26); the score
    falls as the second text drifts from the first."""
    rows = []
    for i in range(140):
        a = f"the {WORDS[i % 10]} and the {WORDS[(i + 1) % 10]} number {i}"
        b = f"the {WORDS[(i + i % 4) % 10]} near a {WORDS[(i + 3) % 10]} at place {i}"  # no text in two pairs
        label = f",{['entailment', 'neutral', 'contradiction'][i % 3]}" if labels else ""
        rows.append(f"{a},{b},{5.0 - (i % 6) * 0.8:.1f}{label},{'train' if i < 40 else 'test'}")
    path = tmp_path / "pairs.csv"
    path.write_text(f"text1,text2,score{',label' if labels else ''},split\n" + "\n".join(rows) + "\n")
    return path


def test_pairs_from_a_pair_corpus_carry_the_gold_score_or_the_teachers_cosine(tmp_path, tiny_model):
    corpus = load_pairs(pair_file(tmp_path, labels=True))
    gold = TrainConfig(corpus="x", recipe="raoe", teacher="score", examples=30, seed=1)
    dataset, stats = ranked_pairs(gold, corpus, tiny_model, "ranked pairs")
    labels = np.array(dataset["label"])
    assert labels.shape == (30, 2) and stats["teacher"] == "score" and stats["source"] == "pair corpus"
    row_of = {(a, b): i for i, (a, b) in enumerate(zip(corpus.train.text1, corpus.train.text2))}
    rows = [row_of[(a, b)] for a, b in zip(dataset["sentence1"], dataset["sentence2"])]
    np.testing.assert_allclose(labels[:, 0], corpus.train.scores[rows])
    np.testing.assert_array_equal(labels[:, 1], corpus.train.labels[rows])  # entailment 0 < neutral 1 < contra 2
    assert 0.0 <= stats["gated_share"] <= 1.0

    ref = TrainConfig(corpus="x", recipe="raoe", examples=30, seed=1)
    dataset, stats = ranked_pairs(ref, corpus, tiny_model, "ranked pairs")
    a = encode(tiny_model, dataset["sentence1"]).embeddings
    b = encode(tiny_model, dataset["sentence2"]).embeddings
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(np.array(dataset["label"])[:, 0], cosine, atol=1e-5)


def test_pairs_mined_from_a_labelled_corpus_put_same_label_pairs_first(tiny_model):
    corpus = load_corpus(demo_corpus_path())
    cfg = TrainConfig(corpus="x", recipe="raoe", examples=200, threshold=-1.0)
    dataset, stats = ranked_pairs(cfg, corpus, tiny_model, "ranked pairs")
    classes = {t: c for t, c in zip(corpus.train_texts, corpus.train_labels)}
    ordinal = np.array(dataset["label"])[:, 1]
    same = np.array([classes[a] == classes[b] for a, b in zip(dataset["sentence1"], dataset["sentence2"])])
    np.testing.assert_array_equal(ordinal, np.where(same, 0.0, 1.0))  # 0 = most related
    assert stats["source"] == "mined from labels" and stats["label_levels"] == [0, 1]


def test_a_raoe_run_on_a_pair_corpus_reports_sts_before_and_after(tmp_path, tiny_model_dir, capsys):
    code = main(["train", str(pair_file(tmp_path)), "--model", str(tiny_model_dir), "--recipe", "raoe", "--teacher",
                 "score", "--examples", "32", "--batch-size", "8", "--json", "--foreground"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "done"
    for when in ("before", "after"):
        assert out[when]["kind"] == "pairs" and -100 <= out[when]["sts_spearman"] <= 100
    run = RunStore().get(out["run_id"])
    assert run.progress["summary"]["examples"]["teacher"] == "score"
    card = (Path(out["model_path"]) / "README.md").read_text()
    assert "STS Spearman" in card and "teacher" in card


@pytest.mark.parametrize(("args", "message"), [
    (["--recipe", "triplet"], "triplet trains on a labelled corpus"),
    (["--recipe", "raoe", "--teacher", "no/such/model"], "Could not find model 'no/such/model'"),
    (["--recipe", "raoe_angle", "--interval", "3"], "interval is not a setting of raoe_angle"),
    (["--recipe", "raoe", "--tau", "inf"], "tau must be a finite number"),
    (["--recipe", "raoe", "--teacher", ""], "teacher is empty; give a value, or leave the setting out"),
])
def test_what_cannot_train_on_a_pair_corpus_exits_2_with_one_line_and_no_run(tmp_path, args, message, capsys):
    assert main(["train", str(pair_file(tmp_path)), *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and message in err and len(err.strip().splitlines()) == 1
    assert RunStore().list() == []


def test_teacher_score_needs_a_scored_pair_corpus(capsys):
    assert main(["train", str(demo_corpus_path()), "--recipe", "raoe", "--teacher", "score"]) == 2
    assert "teacher 'score' needs a pair corpus" in capsys.readouterr().err
    neither = type("Pairs", (), {"kind": "pairs", "name": "snli",
                                 "columns": type("C", (), {"score": None, "label": None})})()
    with pytest.raises(UserError, match="cosent on a pair corpus trains on the order of its score column, or of its "
                                        "NLI labels; snli has neither"):
        get_recipe("cosent").check_corpus(TrainConfig(corpus="x", recipe="cosent"), neither)
    with pytest.raises(UserError, match="cosine on a pair corpus trains on its score column"):  # it reads values
        get_recipe("cosine").check_corpus(TrainConfig(corpus="x", recipe="cosine"), neither)


def test_cosent_and_angle_train_on_nli_labels_as_the_order_of_the_scores(tmp_path, tiny_model):
    """The AnglE paper trains on NLI; the raoe reproduction's AnglE arm on SNLI needs it (issue 53): without a score
    column the labels give the order, entailment 1 > neutral 0.5 > contradiction 0; `cosine`, which regresses to
    the values themselves, still refuses."""
    from core.training.examples import scored_pairs

    path = pair_file(tmp_path, labels=True)
    path.write_text("\n".join(",".join(line.split(",")[:2] + line.split(",")[3:]) for line in
                              path.read_text().splitlines()) + "\n")  # the score column dropped
    corpus = load_pairs(path)
    assert corpus.columns.score is None
    for recipe in ("cosent", "angle"):
        cfg = TrainConfig(corpus=str(path), recipe=recipe, examples=39)
        get_recipe(recipe).check_corpus(cfg, corpus)  # no refusal
        dataset, stats = scored_pairs(cfg, corpus, "cosine")
        assert stats["source"].startswith("pair corpus, NLI labels as scores")
        by_pair = dict(zip(zip(dataset["sentence1"], dataset["sentence2"]), dataset["score"]))
        expected = {(a, b): (2 - label) / 2 for a, b, label in zip(corpus.train.text1, corpus.train.text2,
                                                                    corpus.train.labels)}
        assert by_pair == {pair: expected[pair] for pair in by_pair} and set(by_pair.values()) == {0.0, 0.5, 1.0}
    with pytest.raises(UserError, match="cosine on a pair corpus trains on its score column"):
        get_recipe("cosine").check_corpus(TrainConfig(corpus=str(path), recipe="cosine"), corpus)


def test_train_page_offers_raoe_with_its_settings(app):
    at = app
    at.run()
    at.switch_page("app_pages/2_Train.py").run()
    at.selectbox(key="train:recipe:Supervised").set_value("raoe").run()
    assert not at.exception, at.exception
    assert at.text_input(key="train:teacher").value == "reference"
    assert at.selectbox(key="train:interval:raoe").value == 2
    assert {at.number_input(key=f"train:{name}").label for name in ("tau", "w_rank", "w_angle")} == {
        "Scale tau", "Weight of L_rank", "Weight of L_angle"}


def test_a_labelled_run_can_report_sts_on_a_pair_corpus_too(tmp_path, tiny_model_dir, capsys):
    code = main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--recipe", "cosent",
                 "--examples", "32", "--batch-size", "16", "--sts-corpus", str(pair_file(tmp_path)), "--json", "--foreground"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    for when in ("before", "after"):
        assert "polarity" in out[when] and -100 <= out[when]["sts_spearman"] <= 100


def test_an_sts_corpus_without_scores_is_refused_before_a_run(tmp_path, capsys):
    assert main(["train", str(demo_corpus_path()), "--sts-corpus", str(tmp_path / "missing.csv")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    unscored = tmp_path / "nli_only.csv"
    unscored.write_text("text1,text2,label\n" + "\n".join(f"a {i},b {i},neutral" for i in range(20)) + "\n")
    assert main(["train", str(demo_corpus_path()), "--sts-corpus", str(unscored)]) == 2
    assert "has no score column" in capsys.readouterr().err
    assert RunStore().list() == []


def test_the_angle_term_alone_on_pairs_of_one_label_is_refused_not_trained_for_nothing(tmp_path, tiny_model):
    """STS-B has scores and no labels: raoe_angle trained 20 steps on a GPU and came out bit-identical (gpu-check).
    The rank term still learns from the scores, so raoe and raoe_rank keep training there."""
    corpus = load_pairs(pair_file(tmp_path))  # scores, no label column: every pair on label 0
    for settings in ({"recipe": "raoe_angle"}, {"recipe": "raoe", "w_rank": 0.0}):
        cfg = TrainConfig(corpus="x", teacher="score", examples=30, **settings)
        with pytest.raises(UserError, match="would train nothing") as refused:
            ranked_pairs(cfg, corpus, tiny_model, "ranked pairs")
        assert "\n" not in str(refused.value)
    for settings in ({"recipe": "raoe"}, {"recipe": "raoe_rank"}, {"recipe": "raoe", "w_rank": 0.0, "gate": "score"}):
        _, stats = ranked_pairs(TrainConfig(corpus="x", teacher="score", examples=30, **settings), corpus, tiny_model,
                                "ranked pairs")
        assert stats["examples"] == 30
