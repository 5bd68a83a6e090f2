"""Issue 30, section 4: `compare` judges only like with like (docs/definitions.md, Paired comparisons). The same test
items are matched by content whatever their training rows; a figure computed under another judge (S@k), k, discount
or kNN metric is named in a note instead of compared; below 10 items no interval or p-value is given and below 30 a
note says they are rough; the p-value and the interval agree by construction; figures carry the runs' own k."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.cli import main
from core.evaluation import items as per_item
from core.evaluation.paired import FEW_ITEMS, MIN_ITEMS, interval_and_p, compare
from tests.conftest import tiny_runs_home
from tests.tiny_model import build_tiny_model

CONDITIONS = {"k": 16, "discount": "linear", "knn_k": 10, "knn_metric": "euclidean", "judge": "minilm",
              "train": "train-a"}


def _result(ref: str, arrays: dict, of: dict, judge: str = "all-MiniLM-L6-v2", **figures) -> dict:
    """An evaluation result as evaluate_corpus stores it; `figures` may override a condition with `cond_<name>`."""
    per_item.save(ref, arrays)
    overrides = {k[5:]: figures.pop(k) for k in list(figures) if k.startswith("cond_")}
    return {**figures, "judge": judge, "items": {"ref": ref, "of": of, "conditions": {**CONDITIONS, **overrides},
                                                 "content": per_item.CONTENT_VERSION}}


def _texts(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"polarity": rng.random(n), "similarity": rng.random(n), "knn_pred": rng.integers(0, 2, n),
            "knn_label": rng.integers(0, 2, n)}


def _labelled(ref: str, n: int = 40, seed: int = 0, **extra) -> dict:
    arrays = _texts(n, seed)
    extra.setdefault("k", 16)
    return _result(ref, arrays, {"texts": "same"}, polarity=100 * arrays["polarity"].mean(),
                   similarity=100 * arrays["similarity"].mean(),
                   knn_accuracy=float((arrays["knn_pred"] == arrays["knn_label"]).mean()), **extra)


@pytest.mark.parametrize("below", range(20, 31))
def test_the_interval_excludes_zero_exactly_when_p_is_below_005(below):
    # 1,000 differences, `below` of them <= 0: the boundary (25 of 1,000 gave [-0.00113, -0.00000004] with
    # p = 0.050 when the bounds were interpolated quantiles)
    rng = np.random.default_rng(below)
    deltas = np.concatenate([-rng.random(below) * 1e-3, 1e-3 + rng.random(1000 - below)])
    low, high, p = interval_and_p(deltas, 0.95)
    assert (low > 0 or high < 0) == (p < 0.05), (below, low, high, p)
    assert low <= high


def test_a_different_judge_is_not_compared_and_the_note_names_both():
    a = _labelled("judge-a")
    b = _labelled("judge-b", seed=1, judge="tiny-bert", cond_judge="tiny")
    diffs, notes = compare(a, b)
    assert [d.name for d in diffs] == ["polarity", "knn_accuracy"]
    (note,) = [n for n in notes if n.startswith("S@16")]
    assert "not compared" in note and "all-MiniLM-L6-v2" in note and "tiny-bert" in note


@pytest.mark.parametrize(("condition", "value", "words", "names"), [
    ("k", 5, "k (16 vs 5)", ["knn_accuracy"]),
    ("discount", "none", "rank discount (linear vs none)", ["knn_accuracy"]),
    ("knn_metric", "cosine", "kNN metric (euclidean vs cosine)", ["polarity", "similarity"]),
])
def test_another_k_discount_or_knn_metric_is_named_not_called_other_texts(condition, value, words, names):
    a = _labelled("cond-a")
    b = _labelled("cond-b", seed=1, **{f"cond_{condition}": value, **({"k": 5} if condition == "k" else {})})
    diffs, notes = compare(a, b)
    assert [d.name for d in diffs] == names
    assert notes and all(words in n for n in notes) and not any("different texts" in n for n in notes)
    if condition == "k":
        assert notes[0].startswith("P@16 / P@5 not compared")


def test_the_same_test_texts_with_other_training_rows_are_compared_with_a_note():
    a = _labelled("train-a")
    b = _labelled("train-b", seed=1, cond_train="train-b")
    diffs, notes = compare(a, b)
    assert [d.name for d in diffs] == ["polarity", "similarity", "knn_accuracy"]
    assert notes == ["same test texts, other training texts: the kNN votes and the P@k pool of each come from its own "
                     "training split"]


@pytest.mark.parametrize(("n", "group", "figure"), [(1, "texts", "kNN accuracy"), (9, "texts", "P@16"),
                                                     (1, "lists", "Kendall tau")])
def test_below_ten_items_no_interval_or_p_value_is_given(n, group, figure):
    if group == "texts":
        a, b = _labelled("few-a", n=n), _labelled("few-b", n=n, seed=1)
    else:
        rng = np.random.default_rng(0)
        arrays = [{"list_exact": rng.integers(0, 2, n).astype(float), "list_tau": rng.random(n)} for _ in range(2)]
        a, b = (_result(f"few-{i}", x, {"lists": "l"}, ordering_accuracy=float(x["list_exact"].mean()),
                        kendall_tau=float(x["list_tau"].mean())) for i, x in enumerate(arrays))
    diffs, notes = compare(a, b)
    assert diffs and all(d.p_value != d.p_value and d.ci_low != d.ci_low for d in diffs)  # NaN: none given
    assert all(d.as_dict()["p_value"] is None and d.mcnemar_p is None for d in diffs)
    assert any(note.startswith(f"{figure}: n = {n} test ") and "too few to judge" in note for note in notes)
    assert n < MIN_ITEMS


def test_below_thirty_items_a_note_says_the_interval_is_rough():
    diffs, notes = compare(_labelled("some-a", n=20), _labelled("some-b", n=20, seed=1))
    assert all(d.p_value == d.p_value for d in diffs)  # given
    assert any("only 20 test texts" in note and "rough" in note for note in notes)
    assert not compare(_labelled("many-a", n=FEW_ITEMS), _labelled("many-b", n=FEW_ITEMS, seed=1))[1]


def test_real_evaluations_match_items_by_content(tiny_model, tmp_path):
    """Two corpora with the same test rows and other training rows (labelled and pairs) score the same items; another
    k is named as such, not as other texts."""
    from core.data.corpus import load_corpus
    from core.data.pairs import load_pairs
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.evaluation.evaluate import EvalSettings

    words = "red green blue black white small large fast slow happy sad old new warm cold".split()
    test = [(f"the {w} house", i % 2) for i, w in enumerate(words[:12])]

    def labelled(name: str, offset: int) -> object:
        rows = [(f"a {w} {v} dog", i % 2) for i, w in enumerate(words) for v in words[offset:offset + 4]]
        lines = ["text,label,split"] + [f"{t},{lab},train" for t, lab in rows] + [f"{t},{lab},test" for t, lab in test]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        return load_corpus(tmp_path / name)

    first, second = labelled("a.csv", 0), labelled("b.csv", 5)
    assert first.fingerprint != second.fingerprint
    ra, rb = evaluate_corpus(tiny_model, tiny_model, first), evaluate_corpus(tiny_model, tiny_model, second)
    diffs, notes = compare(ra, rb)
    assert [d.name for d in diffs] == ["polarity", "similarity", "knn_accuracy"]
    assert any(note.startswith("same test texts, other training texts") for note in notes)
    diffs, notes = compare(ra, evaluate_corpus(tiny_model, tiny_model, first, EvalSettings(k=5)))
    assert [d.name for d in diffs] == ["knn_accuracy"] and all("k (16 vs 5)" in n for n in notes[:2])

    def pairs(name: str, offset: int) -> object:
        lines = ["text1,text2,score,split"]
        lines += [f"a {w} cat,a {v} cat,{(i + j) % 5},train" for i, w in enumerate(words)
                  for j, v in enumerate(words[offset:offset + 3])]
        lines += [f"the {w} car,the {v} car,{i % 5 + 0.5},test" for i, (w, v) in enumerate(zip(words, words[1:]))]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        return load_pairs(tmp_path / name)

    pa, pb = pairs("pa.csv", 0), pairs("pb.csv", 6)
    assert pa.fingerprint != pb.fingerprint
    diffs, notes = compare(evaluate_corpus(tiny_model, tiny_model, pa), evaluate_corpus(tiny_model, tiny_model, pb))
    assert [d.name for d in diffs] == ["sts_spearman"] and d_has_interval(diffs[0])


def d_has_interval(d) -> bool:
    return d.ci_low <= d.delta <= d.ci_high and 0 <= d.p_value <= 1


@pytest.fixture(scope="module")
def judged_runs(tmp_path_factory, tiny_model_dir):
    """Two tiny runs of one model on the demo corpus, the second judged by another reference model, at k = 5."""
    other = build_tiny_model(tmp_path_factory.mktemp("judge") / "model", layers=1)
    return tiny_runs_home(tmp_path_factory, tiny_model_dir, {"eval_k": 5}, {"eval_k": 5, "reference": str(other)})


def test_compare_of_runs_judged_by_other_references_gives_no_s_difference(judged_runs, monkeypatch, capsys):
    home, (first, second) = judged_runs
    monkeypatch.setenv("CONTRASTLAB_HOME", str(home))
    assert main(["compare", first, second, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "similarity" not in {m["name"] for m in out["metrics"]}
    assert any(n.startswith("S@5 not compared: judged by different reference models") for n in out["notes"])
    assert main(["compare", second]) == 0  # one run, after - before: the same judge on both sides
    text = capsys.readouterr().out
    assert "S@5 " in text and "P@5 " in text and "P@16" not in text


SMALL = "text,label,split\n" + "".join(
    f"{w} {v} note,{'ab'[i % 2]},train\n" for i, w in enumerate("red green blue black white small large".split())
    for v in "one two three".split()) + "".join(
    f"the {w} test,{'abc'[i % 3]},test\n" for i, w in enumerate("fast slow happy sad old new warm cold cool hot "
                                                                "dry wet".split()))


def test_few_test_texts_and_a_class_without_training_texts_are_warned(tmp_path, tiny_model_dir, capsys):
    from core.data.corpus import load_corpus

    path = tmp_path / "small.csv"
    path.write_text(SMALL)
    warnings = load_corpus(path).report.warnings
    assert any(w.startswith("Only 12 test texts score a model") for w in warnings)
    assert any(w.startswith("1 test class has no training text ('c'; 4 test texts)") for w in warnings)
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--json"]) == 0
    err = capsys.readouterr().err
    assert "warning: Only 12 test texts" in err and "warning: 1 test class has no training text" in err


def test_the_corpus_page_warns_of_both(app):
    from tests.conftest import paste_table

    at = paste_table(app, SMALL)
    shown = [w.value for w in at.warning]
    assert any("Only 12 test texts" in w for w in shown) and any("no training text" in w for w in shown)


def test_few_test_lists_are_warned(tmp_path):
    from core.data.lists import load_lists

    rows = ["list_id,rank,text,split"] + [f"{i},{r},item {i} {r},{'test' if i < 12 else 'train'}"
                                           for i in range(40) for r in range(1, 4)]
    (tmp_path / "lists.csv").write_text("\n".join(rows) + "\n")
    warnings = load_lists(tmp_path / "lists.csv").report.warnings
    assert any(w.startswith("Only 12 test lists score a model") for w in warnings)
