"""Leakage of pair and list corpora (issue 25, item 3): a test pair that is also a training pair in either order, or
a test list with a training list's anchor and members, is counted with examples like the labelled report's leaked
texts and dropped with --drop-leaked / the Corpus page's checkbox; the softer figure (a test pair with a text in
the training pairs, a test list whose anchor is in the training lists) is counted and named, never dropped."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from core.cli import main
from core.data.kinds import load_any
from core.data.lists import build_lists, detect_list_columns
from core.data.pairs import build_pairs, detect_pair_columns
from core.errors import UserError
from tests.conftest import no_errors, paste_table, shared_data

N_TRAIN, N_TEST = 30, 20


# ---------------------------------------------------------------- pairs


def pair_table(reversed_: int = 1, sharing: int = 1, straight: int = 0) -> pd.DataFrame:
    """30 training and 20 test pairs, all texts distinct, then: the first `reversed_` test pairs are training pairs
    with their texts swapped, the next `straight` training pairs as they are, and the next `sharing` test pairs
    keep their text2 but take a training pair's text1 (they share one text, they are no training pair)."""
    train = [(f"train one {i}", f"train two {i}", i % 6, "train") for i in range(N_TRAIN)]
    test = [[f"test one {i}", f"test two {i}", i % 6, "test"] for i in range(N_TEST)]
    for i in range(reversed_):
        test[i][:2] = [train[i][1], train[i][0]]
    for i in range(reversed_, reversed_ + straight):
        test[i][:2] = [train[i][0], train[i][1]]
    for i in range(reversed_ + straight, reversed_ + straight + sharing):
        test[i][0] = train[i][0]
    return pd.DataFrame(train + [tuple(row) for row in test], columns=["text1", "text2", "score", "split"])


def pairs(df: pd.DataFrame, **kwargs):
    return build_pairs(df, detect_pair_columns(df), "p", **kwargs)


def test_a_test_pair_equal_to_a_training_pair_reversed_is_leaked():
    corpus = pairs(pair_table(reversed_=1, sharing=0))
    report = corpus.report
    assert (report.leaked, report.leaked_dropped, report.shared) == (1, 0, 1)
    assert report.leaked_examples == [["train two 0", "train one 0"]]
    assert corpus.leakage() == "1 test pair is also a training pair, the same two texts in either order"
    assert corpus.sharing() == ""  # the one pair sharing a text is the repeat itself: nothing more to say
    assert corpus.summary()["leaked"] == 1 and corpus.summary()["shared"] == 1
    json.dumps(report.as_dict())


def test_a_pair_sharing_one_text_counts_in_the_softer_figure_only():
    corpus = pairs(pair_table(reversed_=2, straight=1, sharing=3))
    report = corpus.report
    assert (report.leaked, report.shared) == (3, 6)
    assert report.shared_examples == ["train one 3", "train one 4", "train one 5"]
    assert corpus.leakage() == "3 test pairs are also training pairs, the same two texts in either order"
    assert corpus.sharing() == "6 of the 20 test pairs (30%) have a text that also occurs in a training pair"


def test_drop_leaked_removes_exactly_the_repeated_pairs_and_changes_the_fingerprint():
    kept = pairs(pair_table(reversed_=2, straight=1, sharing=3))
    dropped = pairs(pair_table(reversed_=2, straight=1, sharing=3), drop_leaked=True)
    assert (dropped.report.leaked, dropped.report.leaked_dropped, dropped.report.shared) == (3, 3, 6)
    assert dropped.train.text1 == kept.train.text1 and dropped.train.text2 == kept.train.text2
    assert list(zip(dropped.test.text1, dropped.test.text2)) == list(zip(kept.test.text1, kept.test.text2))[3:]
    assert dropped.test.scores.tolist() == kept.test.scores.tolist()[3:]
    assert "train one 3" in dropped.test.text1  # the pairs sharing one text stay
    assert dropped.fingerprint != kept.fingerprint
    assert (kept.report.rows_kept, dropped.report.rows_kept) == (50, 47)
    assert dropped.summary()["rows_test"] == 17 and dropped.summary()["leaked_dropped"] == 3
    assert dropped.sharing() == "6 of the 20 test pairs (30%) have a text that also occurs in a training pair"


def test_pairs_without_leakage_report_zero_and_drop_nothing():
    kept, dropped = pairs(pair_table(0, 0)), pairs(pair_table(0, 0), drop_leaked=True)
    assert (kept.report.leaked, kept.report.shared, kept.report.leaked_examples) == (0, 0, [])
    assert kept.sharing() == "" and dropped.fingerprint == kept.fingerprint


def test_holdout_pairs_count_leaks_between_the_seeded_halves():
    df = pd.DataFrame({"text1": [f"one {i}" for i in range(400)], "text2": [f"two {i}" for i in range(400)],
                       "score": [i % 6 for i in range(400)]})
    df = pd.concat([df, df.iloc[:20].rename(columns={"text1": "text2", "text2": "text1"})], ignore_index=True)
    kept, dropped = pairs(df), pairs(df, drop_leaked=True)
    train = {tuple(sorted(p)) for p in zip(kept.train.text1, kept.train.text2)}
    leaked = [p for p in zip(kept.test.text1, kept.test.text2) if tuple(sorted(p)) in train]
    assert kept.target_split == "holdout" and kept.report.leaked == len(leaked) > 0
    assert dropped.train.text1 == kept.train.text1
    assert list(zip(dropped.test.text1, dropped.test.text2)) == [p for p in zip(kept.test.text1, kept.test.text2)
                                                                 if p not in leaked]


def test_dropping_every_test_pair_is_one_clear_error():
    with pytest.raises(UserError, match="^Every one of the 20 test pairs is also a training pair, the same two "
                                        "texts in either order, so dropping them would leave nothing") as caught:
        pairs(pair_table(reversed_=10, straight=10, sharing=0), drop_leaked=True)
    assert "\n" not in str(caught.value)


def test_stsb_counts_its_repeated_and_its_shared_test_pairs():
    path = shared_data("stsb.csv")
    kept, dropped = load_any(path), load_any(path, drop_leaked=True)
    assert (kept.report.leaked, kept.report.shared, len(kept.test)) == (12, 249, 1379)
    assert kept.sharing() == "249 of the 1,379 test pairs (18%) have a text that also occurs in a training pair"
    assert len(dropped.test) == 1367 and dropped.train.text1 == kept.train.text1
    assert dropped.fingerprint != kept.fingerprint


# ---------------------------------------------------------------- lists


def list_table(permuted: int = 1, anchored: int = 1, every: bool = False) -> pd.DataFrame:
    """12 training and 6 test lists of 4 distinct texts; the first `permuted` test lists (all with `every`) are
    training lists with their members in another order, the next `anchored` have a training list's last member
    as their anchor."""
    train = {f"t{i}": [f"train anchor {i}", *(f"train member {i}-{r}" for r in range(3))] for i in range(12)}
    test = {f"x{i}": [f"test anchor {i}", *(f"test member {i}-{r}" for r in range(3))] for i in range(6)}
    permuted = 6 if every else permuted
    for i in range(permuted):
        anchor, *members = train[f"t{i}"]
        test[f"x{i}"] = [anchor, *reversed(members)]
    for i in range(permuted, permuted + anchored):
        test[f"x{i}"][0] = train[f"t{i}"][-1]
    rows = [{"list_id": lid, "rank": r + 1, "text": text, "split": split}
            for split, lists in (("train", train), ("test", test)) for lid, members in lists.items()
            for r, text in enumerate(members)]
    return pd.DataFrame(rows)


def lists(df: pd.DataFrame, **kwargs):
    return build_lists(df, detect_list_columns(df), "l", **kwargs)


def test_a_test_list_with_a_training_lists_anchor_and_members_is_leaked_and_an_anchor_alone_is_shared():
    corpus = lists(list_table(permuted=2, anchored=1))
    report = corpus.report
    assert (report.leaked, report.shared) == (2, 3)
    assert report.leaked_examples == ["train anchor 0", "train anchor 1"]
    assert report.shared_examples == ["train member 2-2"]
    assert corpus.leakage() == "2 test lists are also training lists, the same anchor and members in any order"
    assert corpus.sharing() == "3 of the 6 test lists (50%) have an anchor that also occurs in a training list"
    assert corpus.summary()["leaked"] == 2 and corpus.summary()["shared"] == 3


def test_a_test_list_holding_training_texts_under_another_anchor_is_neither():
    df = list_table(0, 0)
    df.loc[(df.list_id == "x0") & (df["rank"] > 1), "text"] = ["train member 0-0", "train member 0-1",
                                                               "train member 0-2"]
    report = lists(df).report
    assert (report.leaked, report.shared) == (0, 0)


def test_drop_leaked_removes_exactly_the_repeated_lists():
    kept, dropped = lists(list_table(2, 1)), lists(list_table(2, 1), drop_leaked=True)
    assert (dropped.report.leaked, dropped.report.leaked_dropped) == (2, 2)
    assert dropped.test.ids == kept.test.ids[2:] and dropped.train.lists == kept.train.lists
    assert dropped.fingerprint != kept.fingerprint
    assert (kept.report.lists_kept, dropped.report.lists_kept) == (18, 16)
    clean, clean_dropped = lists(list_table(0, 0)), lists(list_table(0, 0), drop_leaked=True)
    assert (clean.report.leaked, clean.report.shared, clean.sharing()) == (0, 0, "")
    assert clean_dropped.fingerprint == clean.fingerprint


def test_dropping_every_test_list_is_one_clear_error():
    with pytest.raises(UserError, match="^Every one of the 6 test lists is also a training list") as caught:
        lists(list_table(every=True, anchored=0), drop_leaked=True)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- CLI


@pytest.fixture
def files(tmp_path):
    made = {}
    for name, df in (("pairs", pair_table(2, 3, straight=1)), ("clean_pairs", pair_table(0, 0)),
                     ("all_pairs", pair_table(10, 0, straight=10)), ("lists", list_table(2, 1)),
                     ("all_lists", list_table(every=True, anchored=0))):
        made[name] = tmp_path / f"{name}.csv"
        df.to_csv(made[name], index=False)
    return made


def test_cli_warns_about_leaked_and_shared_pairs_and_drops_only_the_repeats(files, tiny_model_dir, capsys):
    assert main(["evaluate", str(files["pairs"]), "--model", str(tiny_model_dir), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_pairs"] == 20
    assert ("warning: 3 test pairs are also training pairs, the same two texts in either order (e.g. 'train two 0' "
            "/ 'train one 0', 'train two 1' / 'train one 1', 'train one 2' / 'train two 2'), so a model can score "
            "them by memory; --drop-leaked drops them.\n") in out.err
    assert ("warning: 6 of the 20 test pairs (30%) have a text that also occurs in a training pair (e.g. 'train one "
            "3', 'train one 4', 'train one 5'), so a model may score them partly by memory; --drop-leaked drops only "
            "the 3 exact repeats, not the 3 others.\n") in out.err

    assert main(["evaluate", str(files["pairs"]), "--model", str(tiny_model_dir), "--json", "--drop-leaked"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_pairs"] == 17
    assert "the same two texts in either order (e.g. 'train two 0' / 'train one 0'" in out.err
    assert "); dropped from the test split (--drop-leaked).\n" in out.err
    assert "6 of the 20 test pairs (30%) have a text" in out.err


def test_cli_warns_about_leaked_lists_and_drops_them(files, tiny_model_dir, capsys):
    assert main(["evaluate", str(files["lists"]), "--model", str(tiny_model_dir), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_lists"] == 6
    assert ("warning: 2 test lists are also training lists, the same anchor and members in any order (e.g. 'train "
            "anchor 0', 'train anchor 1'), so a model can score them by memory; --drop-leaked drops them.\n") in out.err
    assert ("warning: 3 of the 6 test lists (50%) have an anchor that also occurs in a training list (e.g. 'train "
            "member 2-2'), so a model may score them partly by memory; --drop-leaked drops only the 2 exact "
            "repeats, not the 1 other.\n") in out.err

    assert main(["evaluate", str(files["lists"]), "--model", str(tiny_model_dir), "--json", "--drop-leaked"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_lists"] == 4
    assert "(e.g. 'train anchor 0', 'train anchor 1'); dropped from the test split (--drop-leaked).\n" in out.err


def test_cli_says_nothing_of_leaks_where_there_are_none(files, tiny_model_dir, capsys):
    assert main(["evaluate", str(files["clean_pairs"]), "--model", str(tiny_model_dir), "--json",
                 "--drop-leaked"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_pairs"] == 20
    assert "training pair" not in out.err and "drop-leaked" not in out.err


@pytest.mark.parametrize("name, unit, n", [("all_pairs", "pairs", 20), ("all_lists", "lists", 6)])
def test_cli_dropping_every_target_item_exits_2_with_one_line(files, capsys, name, unit, n):
    assert main(["evaluate", str(files[name]), "--drop-leaked"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: Every one of the {n} test {unit} is also a training {unit[:-1]}, ")
    assert err.endswith("keep them or fix the split.\n") and err.count("\n") == 1


def test_a_run_config_may_drop_leaked_pairs_and_lists(files):
    """The worker's and the export's reader (load_any) drops the same items for a run's drop_leaked."""
    from core.training.config import TrainConfig

    assert TrainConfig.from_dict({"corpus": str(files["pairs"]), "model": "m", "drop_leaked": True}).drop_leaked
    assert len(load_any(files["pairs"], drop_leaked=True).test) == 17
    assert len(load_any(files["lists"], drop_leaked=True).test) == 4


# ---------------------------------------------------------------- Corpus page


def test_corpus_page_shows_the_pair_leakage_and_its_checkbox_drops_the_repeats(app):
    at = paste_table(app, pair_table(2, 3, straight=1).to_csv(index=False))
    no_errors(at)
    cards = {m.label: m.value for m in at.metric}
    assert cards["Leaked pairs"] == "3"
    warnings = [w.value for w in at.warning]
    leak = next(w for w in warnings if "training pairs, the same two texts" in w)
    assert leak.startswith("**3 test pairs are also training pairs, the same two texts in either order**, so a "
                           "model can score them by memory")
    assert "- `train two 0` · `train one 0`" in leak
    shared = next(w for w in warnings if "have a text that also occurs" in w)
    assert shared.startswith("**6 of the 20 test pairs (30%) have a text that also occurs in a training pair**")
    assert "only exact repeats can be dropped" in shared and "`train one 3`" in shared
    before = at.session_state["corpus"]

    at.checkbox(key="drop_leaked").check().run()
    no_errors(at)
    after = at.session_state["corpus"]
    assert len(after.test) == 17 and after.train.text1 == before.train.text1
    assert after.fingerprint != before.fingerprint
    assert any("; dropped from the test split" in w.value for w in at.warning)
    assert any(c.value.startswith("30 train and 17 test pairs") for c in at.caption)


def test_corpus_page_shows_the_list_leakage_and_its_checkbox_drops_the_repeats(app):
    at = paste_table(app, list_table(2, 1).to_csv(index=False))
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Leaked lists"] == "2"
    assert any(w.value.startswith("**2 test lists are also training lists") for w in at.warning)
    at.checkbox(key="drop_leaked").check().run()
    no_errors(at)
    assert len(at.session_state["corpus"].test) == 4


def test_corpus_page_shows_no_leak_box_for_clean_pairs(app):
    at = paste_table(app, pair_table(0, 0).to_csv(index=False))
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Leaked pairs"] == "0"
    assert not [w for w in at.warning if "training pair" in w.value]
    assert "drop_leaked" not in [c.key for c in at.checkbox]


def test_the_leak_masks_hold_one_value_per_target_item():
    from core.data.leakage import find_leaks

    leaks = find_leaks([("a", "b")], [("b", "a"), ("a", "c"), ("c", "d")], key=lambda p: tuple(sorted(p)),
                       texts=lambda p: p)
    assert leaks.leaked.tolist() == [True, False, False] and leaks.shared.tolist() == [True, True, False]
    assert leaks.shared_examples == ["a"] and leaks.leaked.dtype == np.bool_
