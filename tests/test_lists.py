"""List corpora (issue 10): list files in every format give the same lists in rank order, splits by column or a
seeded holdout, every hostile file refused with one line (also through the CLI), NLI lists from pairs, training on
validation rows when a file has no train rows, and neighbour lists of a labelled corpus."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.cli import main
from core.data.corpus import build_corpus, detect_columns
from core.data.kinds import corpus_kind, kind_of, load_any, table_kind
from core.data.lists import ListCorpus, build_lists, detect_list_columns, load_lists, neighbour_lists
from core.data.pairs import nli_lists
from core.data.pairs import NLI_LABELS, build_pairs, detect_pair_columns, load_pairs
from core.data.table import train_on_validation
from core.errors import UserError
from tests.conftest import shared_data

REPO = Path(__file__).resolve().parents[1]
WORDS = ["cat", "dog", "car", "tree", "house", "river", "music", "bread", "stone", "cloud"]


def lists_of(n_lists: int = 20, size=lambda i: 3 + i % 3) -> dict[str, list[str]]:
    """n lists, list i with size(i) members, each text unique."""
    return {f"q{i:03d}": [f"the {WORDS[i % 10]} and {WORDS[(i + r) % 10]} {i}-{r}" for r in range(size(i))]
            for i in range(n_lists)}


def table_of(lists: dict[str, list[str]], split: dict[str, str] | None = None, seed: int = 0) -> pd.DataFrame:
    """One row per member, rows shuffled so the file order says nothing about the rank."""
    rows = [{"list_id": lid, "rank": r + 1, "text": text, **({"split": split[lid]} if split else {})}
            for lid, members in lists.items() for r, text in enumerate(members)]
    return pd.DataFrame(rows).sample(frac=1, random_state=seed).reset_index(drop=True)


def as_dict(corpus: ListCorpus) -> dict[str, list[str]]:
    return {i: members for part in (corpus.train, corpus.test) for i, members in zip(part.ids, part.lists)}


def build(df: pd.DataFrame) -> ListCorpus:
    return build_lists(df, detect_list_columns(df), "t")


def one_line_error(match: str, call, *args, **kwargs) -> str:
    with pytest.raises(UserError, match=match) as err:
        call(*args, **kwargs)
    assert "\n" not in str(err.value)
    return str(err.value)


# ---------------------------------------------------------------- files and splits


def test_every_format_loads_the_same_lists_in_rank_order(tmp_path):
    lists = lists_of(20)
    df = table_of(lists)
    assert df["rank"].tolist() != sorted(df["rank"])  # the file really is shuffled
    (tmp_path / "l.csv").write_text(df.to_csv(index=False), encoding="utf-8")
    (tmp_path / "l.tsv").write_text(df.to_csv(index=False, sep="\t"), encoding="utf-8")
    (tmp_path / "l.jsonl").write_text("\n".join(json.dumps(r) for r in df.to_dict("records")), encoding="utf-8")
    df.to_parquet(tmp_path / "l.parquet")
    fingerprints = set()
    for name in ("l.csv", "l.tsv", "l.jsonl", "l.parquet"):
        corpus = load_lists(tmp_path / name)
        assert as_dict(corpus) == lists, name
        assert corpus_kind(tmp_path / name) == "lists" and load_any(tmp_path / name).kind == "lists"
        assert corpus.report.rows_read == len(df) and corpus.report.lists_kept == 20
        fingerprints.add(corpus.fingerprint)
    assert len(fingerprints) == 1
    assert table_kind(df) == "lists" and "list_id, rank, text" in kind_of("lists").title


def test_without_a_split_column_a_seeded_tenth_of_the_lists_is_held_out():
    lists = lists_of(40)
    corpus = build(table_of(lists))
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (36, 4, "holdout")
    assert "seed 0" in corpus.report.split_source
    assert set(corpus.train.ids).isdisjoint(corpus.test.ids)
    again = build(table_of(lists))
    assert again.test.ids == corpus.test.ids and again.fingerprint == corpus.fingerprint
    summary = corpus.summary()
    assert summary["kind"] == "lists" and summary["list_size"] == [3, 5] and summary["lists_test"] == 4
    json.dumps(summary), json.dumps(corpus.report.as_dict())


def test_the_split_column_decides_each_lists_split():
    lists = lists_of(20)
    split = {lid: "test" if i % 4 == 0 else "train" for i, lid in enumerate(lists)}
    corpus = build(table_of(lists, split))
    assert corpus.target_split == "test" and corpus.report.split_source == "split column 'split'"
    assert sorted(corpus.test.ids) == sorted(lid for lid, s in split.items() if s == "test")
    assert sorted(corpus.train.ids) == sorted(lid for lid, s in split.items() if s == "train")
    assert as_dict(corpus) == lists


def test_a_list_file_with_validation_and_test_but_no_train_trains_on_validation():
    lists = lists_of(20)
    split = {lid: "test" if i % 2 else "validation" for i, lid in enumerate(lists)}
    corpus = build(table_of(lists, split))
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (10, 10, "test")
    assert sorted(corpus.train.ids) == sorted(lid for lid, s in split.items() if s == "validation")
    assert any("validation rows train" in w for w in corpus.report.warnings)


def test_other_column_names_and_overrides():
    df = table_of(lists_of(12)).rename(columns={"list_id": "QID", "text": "passage"})
    corpus = build(df)
    assert (corpus.columns.list_id, corpus.columns.text) == ("QID", "passage")
    df = df.rename(columns={"passage": "body"})
    one_line_error("needs a list_id, a rank and a text column", detect_list_columns, df)
    assert detect_list_columns(df, text_col="body").text == "body"


# ---------------------------------------------------------------- hostile files


def edited(edit) -> pd.DataFrame:
    """The 12-list table (lists of 3..5, rows in rank order) with one edit applied; ranks as object cells."""
    df = table_of(lists_of(12)).sort_values(["list_id", "rank"]).reset_index(drop=True).astype({"rank": object})
    edit(df)
    return df


def set_ranks(list_id: str, ranks: list):
    def edit(df):
        rows = df.index[df["list_id"] == list_id]
        df.loc[rows[:len(ranks)], "rank"] = pd.Series(ranks, index=rows[:len(ranks)], dtype=object)
    return edit


def drop_rows(list_id: str, keep: int):
    def edit(df):
        df.drop(df.index[df["list_id"] == list_id][keep:], inplace=True)
    return edit


HOSTILE = {
    "rank gap": (set_ranks("q001", [1, 2, 4, 5]), r"List 'q001' has ranks 1, 2, 4, 5; .* must be 1..4"),
    "ranks from 0": (set_ranks("q000", [0, 1, 2]), r"whole numbers 1..n in every list; found 0"),
    "duplicate ranks": (set_ranks("q001", [1, 2, 2, 3]), r"List 'q001' has duplicate ranks \(2\)"),
    "two members": (drop_rows("q003", 2), r"List 'q003' has 2 members; .*at least two texts"),
    "fractional rank": (set_ranks("q000", [1, 2.5, 3]), "found 2.5"),
    "text rank": (set_ranks("q000", [1, "two", 3]), "found 'two'"),
    "infinite rank": (set_ranks("q000", [1, 2, float("inf")]), "found inf"),
    "missing rank": (set_ranks("q000", [1, None, 3]), "found None"),
    "bool rank in an object column": (set_ranks("q000", [1, True, 3]), "found True"),
    "missing list id": (lambda df: df.__setitem__("list_id", df["list_id"].where(df.index != 4, None)),
                        r"1 rows have no list id in column 'list_id'"),
    "empty member text": (lambda df: df.__setitem__("text", df["text"].where(df.index != 1, "   ")),
                          r"List 'q000' has an empty text at rank 2"),
    "fewer than 10 lists": (lambda df: df.drop(df.index[df["list_id"] >= "q009"], inplace=True),
                            "holds 9 lists; provide at least 10"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tables_are_refused_with_one_line(case):
    edit, match = HOSTILE[case]
    one_line_error(match, build, edited(edit))


@pytest.mark.parametrize("case", ["rank gap", "duplicate ranks", "text rank", "missing list id", "empty member text"])
def test_hostile_files_are_refused_with_one_line(tmp_path, case):
    edit, match = HOSTILE[case]
    path = tmp_path / "lists.csv"
    edited(edit).to_csv(path, index=False)
    one_line_error(match, load_lists, path)


def test_a_list_of_65_members_is_refused_and_64_loads():
    lists = lists_of(12)
    lists["q000"] = [f"member number {r}" for r in range(64)]
    assert as_dict(build(table_of(lists)))["q000"] == lists["q000"]
    lists["q000"].append("one too many")
    one_line_error("List 'q000' has 65 members; at most 64", build, table_of(lists))


def test_a_boolean_rank_column_is_refused(tmp_path):
    df = table_of(lists_of(12))
    df["rank"] = df["rank"] == 1
    one_line_error("true/false values", build, df)
    path = tmp_path / "bool.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in df.to_dict("records")), encoding="utf-8")
    one_line_error("true/false values", load_lists, path)


def test_non_finite_ranks_in_a_file(tmp_path):
    for cell in ("nan", "inf", "-inf", "1e400"):
        path = tmp_path / "lists.csv"
        path.write_text(edited(set_ranks("q000", [1, 2, cell])).to_csv(index=False), encoding="utf-8")
        one_line_error("whole numbers 1..n in every list", load_lists, path)


def test_one_list_in_two_splits():
    lists = lists_of(12)
    df = table_of(lists, {lid: "train" for lid in lists})
    df.loc[df.index[df["list_id"] == "q002"][0], "split"] = "test"
    one_line_error(r"List 'q002' has members in more than one split \(test, train\)", build, df)


def test_empty_and_header_only_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    one_line_error("is empty", load_lists, empty)
    header = tmp_path / "header.csv"
    header.write_text("list_id,rank,text\n", encoding="utf-8")
    one_line_error("no data rows", load_lists, header)
    one_line_error("has no rows", build_lists, pd.DataFrame(columns=["list_id", "rank", "text"]),
                   detect_list_columns(pd.DataFrame(columns=["list_id", "rank", "text"])), "t")


def test_duplicate_column_names_in_a_table_or_after_trimming_names(tmp_path):
    df = table_of(lists_of(12))
    df.insert(3, "dup", df["text"])
    df.columns = ["list_id", "rank", "text", "text"]
    one_line_error("duplicate column names \\(text\\)", detect_list_columns, df)
    path = tmp_path / "spaced.csv"
    path.write_text(df.to_csv(index=False).replace("text,text", "text, text ", 1), encoding="utf-8")
    one_line_error("duplicate column names \\(text\\)", load_lists, path)


def test_a_csv_file_repeating_a_column_name_is_refused(tmp_path):
    df = table_of(lists_of(12))
    df.insert(3, "other", "another text")
    path = tmp_path / "dup.csv"
    path.write_text(df.to_csv(index=False).replace("text,other", "text,text", 1), encoding="utf-8")
    one_line_error("duplicate column names", load_lists, path)


def test_a_latin1_file_loads_with_the_encoding_warning(tmp_path):
    lists = lists_of(12)
    lists["q000"][1] = "café crème brûlée"
    path = tmp_path / "latin.csv"
    path.write_bytes(table_of(lists).to_csv(index=False).encode("latin-1"))
    corpus = load_lists(path)
    assert as_dict(corpus)["q000"][1] == "café crème brûlée"
    assert any("Latin-1" in w for w in corpus.report.warnings)


@contextmanager
def time_limit(seconds: float):
    """Interrupt the block once it runs past `seconds` (a slow loader fails in that time, not after minutes)."""
    def expire(*_):
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_twenty_thousand_small_lists_load_in_seconds(tmp_path):
    n = 20_000
    df = pd.DataFrame({"list_id": np.repeat([f"q{i}" for i in range(n)], 3), "rank": np.tile([3, 1, 2], n),
                       "text": [f"text number {i}" for i in range(3 * n)]})
    path = tmp_path / "many.csv"
    df.to_csv(path, index=False)
    df.iloc[:300].to_csv(tmp_path / "few.csv", index=False)
    load_lists(tmp_path / "few.csv")  # imports the splitter's libraries (seconds at load 5): not the work timed
    with time_limit(5.0):
        corpus = load_lists(path)
    assert (len(corpus.train), len(corpus.test)) == (18_000, 2_000)
    assert as_dict(corpus)["q7"] == ["text number 22", "text number 23", "text number 21"]


def test_cli_refuses_a_bad_list_file_with_exit_2_and_one_line(tmp_path, tiny_model_dir, capsys):
    dupes = tmp_path / "dupes.csv"
    edited(set_ranks("q001", [1, 2, 2, 3])).to_csv(dupes, index=False)
    assert main(["evaluate", str(dupes), "--model", str(tiny_model_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: List 'q001' has duplicate ranks") and len(err.strip().splitlines()) == 1

    short = tmp_path / "short.csv"
    edited(drop_rows("q003", 2)).to_csv(short, index=False)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "core", "train", str(short), "--recipe", "listmle", "--model",
                           str(tiny_model_dir)], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        "error: List 'q003' has 2 members; a list needs an anchor and at least two texts to order (3 rows)."]


# ---------------------------------------------------------------- NLI lists


def pair_corpus(rows: list[tuple[str, str, str]], split: list[str] | None = None, label: bool = True):
    data = {"text1": [r[0] for r in rows], "text2": [r[1] for r in rows]}
    data["label" if label else "score"] = [r[2] for r in rows] if label else [1.0] * len(rows)
    if split is not None:
        data["split"] = split
    df = pd.DataFrame(data)
    return build_pairs(df, detect_pair_columns(df), "nli")


def nli_rows(n_premises: int, incomplete: set[int] = frozenset()) -> list[tuple[str, str, str]]:
    """Per premise: hypotheses in the order contradiction, neutral, entailment, a second entailment (the first of each
    label must win); an incomplete premise lacks its contradiction."""
    rows = []
    for p in range(n_premises):
        for label, tag in (("contradiction", "c"), ("neutral", "n"), ("entailment", "e"), ("entailment", "e2")):
            if not (p in incomplete and label == "contradiction"):
                rows.append((f"premise {p}", f"hypothesis {p} {tag}", label))
    return rows


def test_nli_lists_order_premise_entailment_neutral_contradiction_then_another_premise():
    rows = nli_rows(12, incomplete={3, 7})
    split = ["test" if int(r[0].split()[1]) >= 9 else "train" for r in rows]
    corpus = nli_lists(pair_corpus(rows, split), seed=5)
    assert corpus.kind == "lists" and corpus.report.source == "NLI pairs" and corpus.target_split == "test"
    assert (len(corpus.train), len(corpus.test), corpus.report.skipped) == (7, 3, 2)
    hypothesis_of = {r[1]: r[0] for r in rows}
    for members in corpus.train.lists + corpus.test.lists:
        p = members[0].split()[1]
        assert members[0] == f"premise {p}" and p not in {"3", "7"}
        assert members[1:4] == [f"hypothesis {p} e", f"hypothesis {p} n", f"hypothesis {p} c"]
        assert hypothesis_of[members[4]] != members[0]  # a hypothesis of ANOTHER premise
    assert {m[0] for m in corpus.test.lists} == {"premise 9", "premise 10", "premise 11"}
    train_premises = {m[0] for m in corpus.train.lists}
    assert all(hypothesis_of[m[4]] in train_premises | {"premise 3", "premise 7"} for m in corpus.train.lists)

    again, other = nli_lists(pair_corpus(rows, split), seed=5), nli_lists(pair_corpus(rows, split), seed=6)
    assert again.train.lists == corpus.train.lists and again.fingerprint == corpus.fingerprint
    assert [m[4] for m in other.train.lists] != [m[4] for m in corpus.train.lists]


def test_nli_lists_need_a_label_column_and_complete_target_premises():
    one_line_error("has no NLI label column", nli_lists, pair_corpus(nli_rows(25), label=False))
    rows = nli_rows(12, incomplete={9, 10, 11})
    split = ["test" if int(r[0].split()[1]) >= 9 else "train" for r in rows]
    one_line_error("No premise of the test split", nli_lists, pair_corpus(rows, split))


def test_real_snli_gives_five_member_lists_for_every_complete_premise():
    pairs = load_pairs(shared_data("snli.csv"))
    corpus = nli_lists(pairs, seed=0)
    # counted independently: premises with an entailment, a neutral and a contradiction hypothesis, per split
    df = pd.read_csv(shared_data("snli.csv"), keep_default_na=False)
    complete = df.groupby(["split", "text1"])["label"].agg(lambda s: set(s) >= set(NLI_LABELS)).groupby("split").sum()
    assert (len(corpus.train), len(corpus.test)) == (complete["validation"], complete["test"]) == (2617, 2561)
    assert corpus.report.skipped == df.groupby(["split", "text1"]).ngroups - 2617 - 2561
    assert corpus.target_split == "test" and {len(m) for m in corpus.train.lists + corpus.test.lists} == {5}
    assert nli_lists(pairs, seed=0).fingerprint == corpus.fingerprint


# ---------------------------------------------------------------- train on validation


def test_train_on_validation_only_without_train_rows():
    warnings: list[str] = []
    splits = np.array(["validation", "test", "dev", "test"], dtype=object)
    assert train_on_validation(splits, "split", warnings).tolist() == ["train", "test", "train", "test"]
    assert len(warnings) == 1 and "2 validation rows train" in warnings[0]
    for unchanged in (["train", "validation", "test"], ["validation", "validation"], ["test", "test"]):
        warnings = []
        values = np.array(unchanged, dtype=object)
        assert train_on_validation(values, "split", warnings).tolist() == unchanged and not warnings


def test_a_pair_file_without_train_rows_trains_on_validation(tmp_path):
    rows = nli_rows(10)
    path = tmp_path / "pairs.csv"
    df = pd.DataFrame(rows, columns=["text1", "text2", "label"])
    df["split"] = ["validation"] * 24 + ["test"] * 16
    df.to_csv(path, index=False)
    corpus = load_pairs(path)
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (24, 16, "test")
    assert any("24 validation rows train" in w for w in corpus.report.warnings)
    df["split"] = ["train"] * 20 + ["validation"] * 4 + ["test"] * 16
    df.to_csv(path, index=False)
    corpus = load_pairs(path)
    assert (len(corpus.train), len(corpus.test), corpus.target_split) == (20, 16, "test")
    assert not any("validation rows train" in w for w in corpus.report.warnings)


# ---------------------------------------------------------------- neighbour lists


def labelled(extra: list[tuple[str, str, str]] = ()):
    """45 texts in three labels (30 train, 15 test), plus any extra (text, label, split) rows."""
    rows = [(f"the {WORDS[i % 10]} is near a {WORDS[(i * 3) % 10]} number {i}", "abc"[i % 3],
             "test" if i >= 30 else "train") for i in range(45)]
    df = pd.DataFrame([*rows, *extra], columns=["text", "label", "split"])
    return build_corpus(df, detect_columns(df), "labelled")


def check_neighbour_lists(corpus, lists: ListCorpus, size: int) -> None:
    label_of = {t: corpus.classes[c] for t, c in zip(corpus.train_texts, corpus.train_labels)}
    label_of.update({t: corpus.classes[c] for t, c in zip(corpus.test_texts, corpus.test_labels)})
    for members in lists.train.lists + lists.test.lists:
        anchor, same, other = members[0], members[1:1 + size // 2], members[1 + size // 2:]
        assert len(members) == size + 1 and anchor not in members[1:]
        assert all(label_of[t] == label_of[anchor] for t in same)
        assert all(label_of[t] != label_of[anchor] for t in other) and len(other) == size - size // 2


def test_neighbour_lists_put_same_label_texts_before_other_label_texts(tiny_model):
    corpus = labelled()
    lists = neighbour_lists(corpus, tiny_model, size=5, max_lists=10, seed=0)
    assert lists.report.source == "labelled corpus" and lists.target_split == "test"
    assert (len(lists.train), len(lists.test)) == (10, 15)  # 10 sampled train anchors; every target text
    assert {m[0] for m in lists.test.lists} == set(corpus.test_texts)
    assert {m[0] for m in lists.train.lists} <= set(corpus.train_texts)
    assert all(set(m) <= set(corpus.train_texts) for m in lists.train.lists)  # searched within the split
    check_neighbour_lists(corpus, lists, 5)
    again = neighbour_lists(corpus, tiny_model, size=5, max_lists=10, seed=0)
    assert again.fingerprint == lists.fingerprint
    assert neighbour_lists(corpus, tiny_model, size=5, max_lists=10, seed=1).train.ids != lists.train.ids


def test_neighbour_lists_search_only_the_given_train_rows(tiny_model):
    corpus = labelled()
    rows = np.arange(0, 30, 2)  # half the train split, every label in it
    lists = neighbour_lists(corpus, tiny_model, size=2, max_lists=100, seed=0, train_rows=rows)
    sample = {corpus.train_texts[i] for i in rows}
    assert len(lists.train) == len(rows) and all(set(m) <= sample for m in lists.train.lists)
    assert {m[0] for m in lists.test.lists} == set(corpus.test_texts)  # the targets are not sampled


def test_neighbour_lists_refuse_sizes_that_cannot_be_filled(tiny_model):
    corpus = labelled()
    one_line_error("between 2 and 63 members", neighbour_lists, corpus, tiny_model, size=64, max_lists=10)
    one_line_error("between 2 and 63 members", neighbour_lists, corpus, tiny_model, size=1, max_lists=10)
    one_line_error("Too few texts per label to form lists of 10", neighbour_lists, corpus, tiny_model, size=10,
                   max_lists=10)  # a test text has four other texts of its label, not five


def test_an_anchor_text_repeated_under_another_label_is_not_its_own_member(tiny_model):
    corpus = labelled(extra=[("the cat is near a cat number 0", "b", "train")])  # text 0 is labelled 'a' too
    lists = neighbour_lists(corpus, tiny_model, size=4, max_lists=100, seed=0)
    for members in lists.train.lists + lists.test.lists:
        assert members[0] not in members[1:], members
