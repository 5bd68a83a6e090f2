"""Paired comparisons of two evaluations on the same test items (core.evaluation.paired): the bootstrap equals a
direct loop over resamples and a closed form on a toy case, a run against itself is a difference of 0 with the
interval [0, 0] and p = 1, McNemar matches its binomial, evaluations keep their per-item arrays, and `compare`
prints the issue's JSON and refuses what it cannot compare in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest, spearmanr

from core.cli import main
from core.evaluation import items as per_item
from core.evaluation.paired import FIGURES, compare, mcnemar, paired_bootstrap
from core.evaluation.uncertainty import resample_indices as resamples
from tests.conftest import tiny_runs_home


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_model_dir) -> tuple[Path, list[str]]:
    return tiny_runs_home(tmp_path_factory, tiny_model_dir, {}, {"margin": 2.0, "lr": 1e-3})


@pytest.fixture
def runs(two_runs, monkeypatch) -> list[str]:
    """The two runs' ids, their home this test's home."""
    home, ids = two_runs
    monkeypatch.setenv("CONTRASTLAB_HOME", str(home))
    return ids


def test_the_bootstrap_equals_a_direct_loop_over_resamples():
    rng = np.random.default_rng(5)
    a, b = {"polarity": rng.random(37)}, {"polarity": rng.random(37)}
    low, high, p = paired_bootstrap(FIGURES["polarity"].statistic, a, b, 37, count=500, seed=3)
    draws = np.random.default_rng(3)
    deltas = []
    for _ in range(500):  # resample i is the i-th integers(0, n, n)
        idx = draws.integers(0, 37, 37)
        deltas.append(100 * (b["polarity"][idx].mean() - a["polarity"][idx].mean()))
    deltas = np.sort(deltas)
    # t = ceil(500 x 0.025) = 13: the 13th smallest and the 13th largest resampled difference
    assert (low, high) == pytest.approx((deltas[12], deltas[-13]), abs=1e-12)
    assert p == pytest.approx(min(1.0, 2 * min((deltas <= 0).mean(), (deltas >= 0).mean())))


def test_the_bootstrap_matches_closed_forms():
    # Two items, differences 0 and 1 (x100): a resample's mean difference is 0, 0.5 or 1 with probabilities
    # 1/4, 1/2, 1/4, so the 95% interval is [0, 1] and P(delta <= 0) = 1/4, p = 1/2.
    a, b = {"polarity": np.zeros(2)}, {"polarity": np.array([0.0, 0.01])}
    low, high, p = paired_bootstrap(FIGURES["polarity"].statistic, a, b, 2, count=20000)
    assert (low, high) == (0.0, pytest.approx(1.0))
    assert p == pytest.approx(0.5, abs=0.02)
    # Many items: the interval of a mean difference is close to the normal one, mean +- 1.96 sd / sqrt(n).
    rng = np.random.default_rng(0)
    x = rng.random(4000)
    a, b = {"similarity": x}, {"similarity": x + rng.normal(0.01, 0.05, 4000)}
    low, high, _ = paired_bootstrap(FIGURES["similarity"].statistic, a, b, 4000, count=4000)
    d = 100 * (b["similarity"] - a["similarity"])
    half = 1.96 * d.std(ddof=1) / math.sqrt(len(d))
    assert low == pytest.approx(d.mean() - half, abs=0.1 * half)
    assert high == pytest.approx(d.mean() + half, abs=0.1 * half)


def test_the_spearman_statistic_is_scipys_on_each_resample():
    rng = np.random.default_rng(1)
    arrays = {"sts_cos": rng.random(50), "sts_gold": np.round(rng.random(50) * 5, 0)}  # tied gold scores
    idx = next(resamples(50, count=3))
    got = FIGURES["sts_spearman"].statistic(arrays, idx)
    for row, value in zip(idx, got):
        assert value == pytest.approx(100 * spearmanr(arrays["sts_cos"][row], arrays["sts_gold"][row]).statistic)


def test_mcnemar_is_the_exact_binomial_of_the_items_that_changed_side():
    right_a = np.array([1, 1, 0, 0, 0, 0, 0, 0, 1, 0], bool)
    right_b = np.array([1, 0, 1, 1, 1, 1, 1, 1, 1, 0], bool)  # 1 only A, 6 only B
    assert mcnemar(right_a, right_b) == pytest.approx(binomtest(1, 7, 0.5).pvalue)
    assert mcnemar(right_a, right_a) == 1.0


def _result(of: dict, ref: str, arrays: dict, **figures) -> dict:
    per_item.save(ref, arrays)
    conditions = {"k": 16, "discount": "linear", "knn_k": 10, "knn_metric": "euclidean", "judge": "j", "train": "t"}
    return {**figures, "items": {"ref": ref, "of": of, "conditions": conditions, "content": per_item.CONTENT_VERSION}}


def test_a_result_against_itself_differs_by_zero_with_interval_zero_and_p_one():
    rng = np.random.default_rng(2)
    arrays = {"polarity": rng.random(30), "similarity": rng.random(30), "knn_pred": rng.integers(0, 3, 30),
              "knn_label": rng.integers(0, 3, 30)}
    r = _result({"texts": "t"}, "self", arrays, polarity=50.0, similarity=40.0, knn_accuracy=0.3)
    diffs, notes = compare(r, r)
    assert notes == [] and [d.name for d in diffs] == ["polarity", "similarity", "knn_accuracy"]
    for d in diffs:
        assert (d.delta, d.ci_low, d.ci_high, d.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert diffs[2].mcnemar_p == 1.0


def test_figures_of_other_items_or_without_arrays_are_named_not_compared():
    arrays = {"sts_cos": np.arange(12.0), "sts_gold": np.arange(12.0)}
    a = _result({"pairs": "stsb"}, "a", arrays, sts_spearman=100.0)
    other = _result({"pairs": "sick"}, "b", arrays, sts_spearman=100.0)
    diffs, notes = compare(a, other)
    assert diffs == [] and notes == ["STS Spearman not compared: the two evaluations scored different pairs"]
    old = {"sts_spearman": 90.0, "items": {**a["items"], "ref": "gone"}}
    diffs, notes = compare(a, old)
    assert diffs == [] and "not kept for one evaluation" in notes[0]


def test_an_evaluation_keeps_its_per_item_arrays(tiny_model, tmp_path):
    from core.data.corpus import demo_corpus_path, load_corpus
    from core.evaluation.corpus_eval import evaluate_corpus

    corpus = load_corpus(demo_corpus_path())
    result = evaluate_corpus(tiny_model, tiny_model, corpus)
    arrays = per_item.load(result)
    n = len(corpus.test_texts)
    assert {k: len(v) for k, v in arrays.items()} == {k: n for k in ("polarity", "similarity", "knn_pred",
                                                                        "knn_label", "knn_neighbours", "texts_order")}
    assert sorted(arrays["texts_order"].tolist()) == list(range(n))  # a permutation: the canonical order of the texts
    assert arrays["polarity"].mean() * 100 == pytest.approx(result["polarity"])
    assert (arrays["knn_pred"] == arrays["knn_label"]).mean() == pytest.approx(result["knn_accuracy"])
    assert arrays["knn_neighbours"].max() < len(corpus.train_texts)
    assert evaluate_corpus(tiny_model, tiny_model, corpus)["items"] == result["items"]  # a cache hit names them


def test_compare_prints_paired_differences_of_two_runs(runs, capsys):
    first, second = runs
    assert main(["compare", first, second, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {m["name"]: m for m in out["metrics"]}
    assert set(rows) == {"polarity", "similarity", "knn_accuracy"}
    for row in rows.values():
        assert set(row) >= {"name", "a", "b", "delta", "ci_low", "ci_high", "p_value"}
        assert row["ci_low"] <= row["delta"] + 1e-9 and row["delta"] - 1e-9 <= row["ci_high"]
        assert 0 <= row["p_value"] <= 1
    assert main(["compare", first, first, "--json"]) == 0
    same = json.loads(capsys.readouterr().out)["metrics"]
    assert all((m["delta"], m["ci_low"], m["ci_high"], m["p_value"]) == (0, 0, 0, 1) for m in same)
    assert main(["compare", first]) == 0  # after - before of one run
    text = capsys.readouterr().out
    assert "before" in text and "P@16" in text and "p " in text
    assert "per class: b - a, paired over the class's own test texts (no interval below 10" in text
    assert main(["compare", first, second, "--json"]) == 0
    classes = json.loads(capsys.readouterr().out)["classes"]  # per class too, with the same floors as the page
    assert classes and all(row["kNN recall change 95% CI, p"].startswith(("[", "n = ")) for row in classes)


def test_compare_refuses_an_unknown_or_unfinished_run_in_one_line(contrastlab_home, capsys):
    from core.runs.store import RunStore

    assert main(["compare", "nosuchrun"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nosuchrun" in err[0]
    queued = RunStore().create("train", {"corpus": "x.csv"})
    assert main(["compare", queued]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "queued" in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize("args", [["compare"], ["compare", "a", "b", "c"]])
def test_compare_usage_errors_exit_2(args):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2


def test_pages_tables_and_the_card_show_paired_intervals_of_real_runs(runs, app):
    from core.analysis.tradeoff import change_table
    from core.runs.store import RunStore
    from tests.conftest import no_errors
    from ui.run_tables import PAIRED, comparison_frame

    first, second = runs
    store = RunStore()
    frame = comparison_frame(store.get(first), store.get(second))
    assert all(", p " in text and text.startswith("[") for text in frame.loc[["P@k", "S@k", "kNN accuracy"], PAIRED])
    assert frame.loc["Linear probe", PAIRED] == "–"  # no per-item figure behind a linear probe's accuracy
    card = (Path(store.get(second).artefacts["model"]) / "README.md").read_text()
    assert "paired over the same test items" in card and ("p = " in card or "p < " in card)
    app.query_params["run"] = second
    app.run()
    at = app.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
    assert any("paired over the same test items" in c.value and "P@16 " in c.value for c in at.caption)
    assert any(c.value.startswith("95% intervals after training: P@16 ") for c in at.caption)  # each figure's own
    assert PAIRED in at.table[0].value.columns
    rows = change_table(store, ("polarity",))  # the Trade-off page's before -> after table
    assert len(rows) == 2 and all("[" in r["P@{k}"] and ", p " in r["P@{k}"] for r in rows)


def test_per_class_differences_equal_a_direct_loop_and_reach_the_per_class_table(runs):
    from core.evaluation.paired import class_differences
    from core.evaluation.per_class import per_class_frame
    from core.runs.store import RunStore

    run = RunStore().get(runs[1])
    a, b = per_item.load_canonical(run.before), per_item.load_canonical(run.metrics_after)  # as compared
    rows = class_differences(run.before, run.metrics_after, count=200, seed=4)
    labels = a["knn_label"]
    assert [r["code"] for r in rows] == sorted(set(labels.tolist()))
    draws, deltas = np.random.default_rng(4), []
    for _ in range(200):
        idx = draws.integers(0, len(labels), len(labels))
        mask = labels[idx] == rows[0]["code"]
        if mask.any():
            right_a = (a["knn_pred"][idx] == labels[idx])[mask].mean()
            right_b = (b["knn_pred"][idx] == labels[idx])[mask].mean()
            deltas.append(right_b - right_a)
    deltas = np.sort(deltas)
    t = math.ceil(len(deltas) * 0.025)  # the order statistics paired.interval_and_p takes
    assert (rows[0]["recall"]["ci_low"], rows[0]["recall"]["ci_high"]) == pytest.approx((deltas[t - 1], deltas[-t]))
    frame = per_class_frame(run.before, run.metrics_after)
    column = "kNN recall change 95% CI, p"
    assert column in frame and all(text.startswith("[") and ", p " in text for text in frame[column])


def test_the_same_items_in_another_order_are_compared_item_by_item(tiny_model):
    """Issue 51: two evaluations of the same test texts in another row order were told they "scored different texts",
    and pairs with text1 and text2 swapped "different pairs", though cosine is symmetric. Items match as sets, pairs
    either way round, and their arrays are lined up item by item (load_canonical)."""
    import pandas as pd

    from core.data.corpus import build_corpus, detect_columns
    from core.data.pairs import build_pairs, detect_pair_columns
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.evaluation.paired import compare

    rows = pd.DataFrame({"text": [f"a {'good' if i % 2 else 'bad'} film {i}" for i in range(60)],
                         "label": ["pos" if i % 2 else "neg" for i in range(60)],
                         "split": ["test" if i % 4 == 0 else "train" for i in range(60)]})
    first = build_corpus(rows, detect_columns(rows), name="a")
    shuffled = rows.sample(frac=1, random_state=3).reset_index(drop=True)
    second = build_corpus(shuffled, detect_columns(shuffled), name="b")
    a, b = (evaluate_corpus(tiny_model, tiny_model, c) for c in (first, second))
    assert per_item.same_items(a, b, "texts")
    assert np.array_equal(*(per_item.load_canonical(r)["knn_pred"] for r in (a, b)))  # item i: one text in both
    diffs, notes = compare(a, b)
    assert "knn_accuracy" in {d.name for d in diffs} and not any("different texts" in n for n in notes), notes

    pairs = pd.DataFrame({"text1": [f"a cat {i}" for i in range(40)], "text2": [f"a dog {i % 9}" for i in range(40)],
                          "score": [float(i % 5) for i in range(40)], "split": ["test"] * 20 + ["train"] * 20})
    swapped = pairs.rename(columns={"text1": "text2", "text2": "text1"})
    p, q = (evaluate_corpus(tiny_model, tiny_model, build_pairs(df, detect_pair_columns(df), "p")) for df in
            (pairs, swapped))
    assert per_item.same_items(p, q, "pairs") and p["sts_spearman"] == pytest.approx(q["sts_spearman"], abs=1e-9)
    diffs, notes = compare(p, q)
    assert [d.name for d in diffs] == ["sts_spearman"] and diffs[0].delta == pytest.approx(0.0, abs=1e-9), notes


def test_each_class_gets_the_floors_of_a_whole_comparison(monkeypatch):
    """A class of 9 test texts whose one vote flips got "p < 0.001" (issue 53; TREC's ABBR has 9): below 10 texts a
    class gets no interval or p-value, below 30 its interval is marked rough, on the page's table as in the JSON."""
    from core.evaluation import per_class
    from core.evaluation.paired import class_differences

    labels = np.repeat([0, 1, 2], [9, 15, 40])
    rng = np.random.default_rng(0)
    a = {"knn_label": labels, "knn_pred": labels.copy(), "polarity": rng.random(64)}
    b = {"knn_label": labels, "knn_pred": labels.copy(), "polarity": rng.random(64)}
    b["knn_pred"][0] = 1  # one vote of the 9-text class flips
    result = {"items": {"of": {"texts": "the same texts"}}}
    rows = class_differences(result, result, count=300, arrays=(a, b))
    assert [(r["n"], r["size"]) for r in rows] == [(9, "too few"), (15, "rough"), (40, None)]
    assert rows[0]["recall"] == {"ci_low": None, "ci_high": None, "p_value": None}
    assert rows[1]["recall"]["ci_low"] is not None and rows[2]["polarity"]["p_value"] is not None

    def per_class_result(classes: list[str]) -> dict:
        return {"per_class": {"k": 16, "knn_k": 10, "classes": [
            {"class": c, "n": n, "polarity": 50.0, "polarity_sd": 1.0, "knn_recall": 0.5}
            for c, n in zip(classes, (9, 15, 40))]}}

    monkeypatch.setattr(per_class, "compared", lambda before, after: {"classes": rows})
    frame = per_class.per_class_frame(per_class_result(["ABBR", "DESC", "NUM"]), per_class_result(["ABBR", "DESC",
                                                                                                  "NUM"]))
    texts = dict(zip(frame["class"], frame["kNN recall change 95% CI, p"]))
    assert texts["ABBR"] == "n = 9: too few to judge (fewer than 10)"
    assert texts["DESC"].startswith("[") and texts["DESC"].endswith("(rough: n = 15 < 30)")
    assert texts["NUM"].startswith("[") and "rough" not in texts["NUM"]
