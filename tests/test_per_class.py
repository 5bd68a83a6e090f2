"""Per-class results: per-class P@k, kNN recall and the kNN confusion matrix agree with direct computations,
flow through `evaluate` (and `python -m core evaluate --json`), and draw on a page."""

import json

import numpy as np
import pandas as pd
import pytest

from sklearn.metrics import confusion_matrix, recall_score
from streamlit.testing.v1 import AppTest

from core.analysis.per_class_plots import confusion_figure
from core.data.corpus import Columns, build_corpus, demo_corpus_path, load_corpus
from core.evaluation.evaluate import EvalSettings, eval_sets, score
from core.evaluation.items import ITEMS
from core.evaluation.metrics import knn_accuracy, knn_predict, polarity_similarity
from core.evaluation.per_class import (
    MAX_CONFUSION_CLASSES,
    SMALL_CLASS,
    confusion_counts,
    per_class,
    per_class_frame,
)
from tests.conftest import shared_data


def _blobs(n_classes: int, sizes: list[int], seed: int, spread: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs that overlap enough for the kNN classifier to make mistakes."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, 6)) * 2
    labels = np.repeat(np.arange(n_classes), sizes)
    return centres[labels] + rng.normal(size=(len(labels), 6)) * spread, labels


def _synthetic(classes: list) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """per_class of a small synthetic evaluation (one class with a single test text), with its inputs."""
    pool, pool_y = _blobs(len(classes), [40] * len(classes), seed=0)
    targets, target_y = _blobs(len(classes), [12, 7, 1, 9][: len(classes)], seed=0)
    ps = polarity_similarity(targets, pool, targets, pool, target_y, pool_y, k=8)
    pred = knn_predict(pool, pool_y, targets, k=10)
    names = np.asarray(classes, dtype=object)
    return per_class(names[target_y], names[pred], ps.target_polarity, classes, ps.k, 10), target_y, pred, \
        ps.target_polarity


def test_per_class_polarity_is_the_mean_of_target_p_by_class():
    result, target_y, _pred, p = _synthetic(["a", "b", "c", "d"])
    want = pd.Series(p * 100).groupby(target_y).agg(["size", "mean", lambda x: x.std(ddof=0)])
    got = pd.DataFrame(result["classes"])
    assert list(got["n"]) == list(want["size"]) == [12, 7, 1, 9]
    assert list(got["polarity"]) == pytest.approx(list(want["mean"]))
    assert list(got["polarity_sd"]) == pytest.approx(list(want["<lambda_0>"]))
    # the headline P@k is the mean over targets, so the count-weighted class means give it back
    assert (got["polarity"] * got["n"]).sum() / got["n"].sum() == pytest.approx(p.mean() * 100)
    assert result["k"] == 8 and result["knn_k"] == 10


def test_per_class_recall_and_confusion_match_sklearn():
    result, target_y, pred, _p = _synthetic(["a", "b", "c", "d"])
    want = confusion_matrix(target_y, pred, labels=[0, 1, 2, 3])
    assert np.array_equal(result["confusion"], want)
    assert 0 < np.trace(want) < want.sum()  # the classifier errs somewhere, so recall is really tested
    assert np.sum(result["confusion"]) == len(target_y)
    recall = recall_score(target_y, pred, labels=[0, 1, 2, 3], average=None)
    assert [row["knn_recall"] for row in result["classes"]] == pytest.approx(list(recall))
    single = result["classes"][2]  # the class with one test text: recall 0 or 1, no spread
    assert single["n"] == 1 and single["knn_recall"] in (0.0, 1.0) and single["polarity_sd"] == 0.0


def test_int_and_string_labels_give_the_same_figures():
    as_ints, *_ = _synthetic([2, 10, 1, 7])
    as_strings, *_ = _synthetic(["2", "10", "1", "7"])
    assert [row["class"] for row in as_ints["classes"]] == [2, 10, 1, 7]  # the given order, not sorted
    assert as_ints["confusion"] == as_strings["confusion"]
    for a, b in zip(as_ints["classes"], as_strings["classes"]):
        assert {k: v for k, v in a.items() if k != "class"} == {k: v for k, v in b.items() if k != "class"}
    assert json.loads(json.dumps(as_ints)) == as_ints  # numpy labels came out as plain JSON
    numpy_labels = per_class(np.array([1, 2]), np.array([2, 2]), np.array([0.5, 1.0]), np.array([1, 2, 3]), 16, 10)
    assert json.dumps(numpy_labels) and numpy_labels["classes"][2] == {
        "class": 3, "n": 0, "polarity": None, "polarity_sd": None, "knn_recall": None}


@pytest.mark.parametrize(("args", "message"), [
    (([], [], [], ["a"]), "there must be targets"),
    ((["a"], ["z"], [1.0], ["a", "b"]), "'z' is not one of the classes"),
    ((["a", "b"], ["a"], [1.0, 1.0], ["a", "b"]), "one entry per target"),
    ((["a"], ["a"], [float("nan")], ["a"]), "finite"),
    ((["a"], ["a"], [1.0], ["a", "a"]), "must not repeat"),
])
def test_bad_inputs_say_what_is_wrong(args, message):
    with pytest.raises(ValueError, match=message):
        per_class(*args, k=16, knn_k=10)


def test_many_classes_keep_the_table_but_not_the_matrix():
    classes = [f"c{i}" for i in range(MAX_CONFUSION_CLASSES + 1)]
    result = per_class(classes, classes, np.ones(len(classes)), classes, 16, 10)
    assert result["confusion"] is None and len(result["classes"]) == len(classes)
    assert confusion_counts({"per_class": result}) is None


def _corpus(labels: list, n_per_class: int = 30, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.repeat(labels, n_per_class)
    df = pd.DataFrame({"text": [f"text {i} {rng.integers(1e9)}" for i in range(len(y))], "label": y})
    return build_corpus(df, Columns(text="text", label="label", split=None), name="synthetic")


def _score(corpus, seed: int = 0, spread: float = 1.5) -> dict:
    """score() on random blob embeddings of the corpus's evaluation texts: no model, no encoding."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(corpus.classes), 8)) * 2
    settings = EvalSettings(linear_probe=False)
    sets = eval_sets(corpus, settings)
    train = centres[sets.train_labels] + rng.normal(size=(len(sets.train_labels), 8)) * spread
    test = centres[corpus.test_labels] + rng.normal(size=(len(corpus.test_labels), 8)) * spread
    return score(corpus, sets, settings, train, test, train, test)


@pytest.mark.parametrize("labels", [[3, 1, 20], ["pos", "neg", "neu"]])
def test_score_returns_per_class_beside_unchanged_headline(labels):
    corpus = _corpus(labels)
    out = _score(corpus)
    data = out["per_class"]
    rows = data["classes"]
    assert [row["class"] for row in rows] == corpus.classes
    assert sum(row["n"] for row in rows) == out["n_queries"] == len(corpus.test_texts)
    assert sum(row["knn_recall"] * row["n"] for row in rows) / out["n_queries"] == pytest.approx(out["knn_accuracy"])
    assert set(out.pop(ITEMS)) == {"polarity", "similarity", "knn_pred", "knn_label", "knn_neighbours"}
    assert json.loads(json.dumps(out)) == out  # the rest JSON-ready as the run store and the CLI write it
    assert all(isinstance(out[key], float) for key in ("polarity", "similarity", "knn_accuracy"))


def test_knn_accuracy_of_score_equals_the_metric():
    corpus = _corpus(["a", "b", "c"])
    rng = np.random.default_rng(1)
    settings = EvalSettings(linear_probe=False)
    sets = eval_sets(corpus, settings)
    train, test = rng.normal(size=(len(sets.train_labels), 4)), rng.normal(size=(len(corpus.test_labels), 4))
    out = score(corpus, sets, settings, train, test, train, test)
    assert out["knn_accuracy"] == knn_accuracy(train[sets.knn_pos], sets.train_labels[sets.knn_pos], test,
                                               corpus.test_labels, settings.knn_k, settings.knn_metric)


def test_trec_table_shows_abbr_with_nine_test_texts():
    corpus = load_corpus(shared_data("trec.csv"))
    frame = per_class_frame(_score(corpus, spread=3.0))
    abbr = frame.set_index("class").loc["ABBR"]
    assert abbr["n"] == 9 and abbr["few"]
    assert frame["n"].sum() == 500 and frame["few"].sum() == 1


def test_frame_before_and_after():
    before, *_ = _synthetic(["a", "b", "c", "d"])
    after = json.loads(json.dumps(before))
    after["classes"][0]["polarity"] += 10
    after["classes"][0]["knn_recall"] = 0.25
    frame = per_class_frame({"per_class": before}, {"per_class": after}).set_index("class")
    assert frame.loc["a", "P@8 change"] == pytest.approx(10)
    assert frame.loc["a", "kNN recall change"] == pytest.approx(25 - 100 * before["classes"][0]["knn_recall"])
    assert frame.loc["b", "P@8 change"] == 0 and list(frame["few"]) == [n < SMALL_CLASS for n in frame["n"]]
    assert per_class_frame({"polarity": 50.0}, None).empty  # a result recorded before per-class data
    only_after = per_class_frame({"polarity": 50.0}, {"per_class": after})
    assert "P@8" in only_after and len(only_after) == 4


def test_confusion_figure_colours_by_row_share_and_escapes_labels():
    counts = np.array([[3, 1, 0], [0, 0, 0], [2, 2, 4]])
    fig = confusion_figure(["<b>x</b>", "empty", "z"], counts, "title")
    heat = fig.data[0]
    z = np.asarray(heat.z, dtype=float)
    assert z[0].tolist() == [0.75, 0.25, 0.0] and np.isnan(z[1]).all() and z[2].tolist() == [0.25, 0.25, 0.5]
    assert np.array_equal(np.asarray(heat.text), counts)
    assert heat.customdata[0][1][:3].tolist() == ["&lt;b&gt;x&lt;/b&gt;", "empty", 1]
    assert "<b>x</b>" not in fig.to_json()
    with pytest.raises(ValueError, match="2 classes"):
        confusion_figure(["a", "b"], counts, "title")


def _view(before, after):
    from ui.per_class_view import per_class_results

    per_class_results(before, after, key="pc", name="test run")


def _run_view(before, after) -> AppTest:
    at = AppTest.from_function(_view, args=(before, after), default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def test_view_before_only_and_before_after():
    before, *_ = _synthetic(["a", "b", "c", "d"])
    at = _run_view({"per_class": before}, None)
    assert list(at.dataframe[0].value["class"]) == ["a", "b", "c", "d"]
    assert len(at.get("plotly_chart")) == 1 and len(at.get("download_button")) == 1
    assert "c (1), b (7), d (9), a (12)" in at.warning[0].value and "in c one text is 100 points" in at.warning[0].value
    at = _run_view({"per_class": before}, {"per_class": before})
    assert "P@8 change" in at.dataframe[0].value.columns
    charts = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert [c["layout"]["title"]["text"] for c in charts] == ["kNN confusion matrix, before training",
                                                             "kNN confusion matrix, after training"]


def test_view_escapes_class_names_in_the_note():
    labels = ["*x*", "[y](http://e)"]
    result = per_class(labels, labels[::-1], [0.5, 0.5], labels, 16, 10)
    note = _run_view({"per_class": result}, None).warning[0].value
    assert r"\*x\*" in note and r"\[y\]\(http" in note


def test_view_without_per_class_data_or_matrix():
    at = _run_view({"polarity": 50.0}, None)
    assert not at.dataframe and "No per-class results" in at.caption[0].value
    classes = [f"c{i}" for i in range(MAX_CONFUSION_CLASSES + 1)]
    many = per_class(classes, classes, np.ones(len(classes)), classes, 16, 10)
    at = _run_view({"per_class": many}, None)
    assert len(at.dataframe[0].value) == len(classes) and not at.get("plotly_chart")
    assert f"up to {MAX_CONFUSION_CLASSES} classes" in at.caption[-1].value


def test_cli_evaluate_json_has_per_class(tiny_model_dir, capsys):
    from core.cli import main

    assert main(["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["per_class"]["classes"]
    assert sum(row["n"] for row in rows) == out["n_queries"] == np.sum(out["per_class"]["confusion"])
    assert np.trace(out["per_class"]["confusion"]) / out["n_queries"] == pytest.approx(out["knn_accuracy"])
