"""Published figures in the right unit, and a store that keeps what it holds (issue 33): `--set knn_accuracy=0.85`
stored 0.85 %, `sts_spearman=0.776` showed "0.8"; a second corruption overwrote the first backup; an entry a read
skipped was deleted by the next --set; a pair corpus without scores took an STS Spearman; -0 showed as "-0.0"."""

from __future__ import annotations

import json

import pytest

from core.cli import main
from core.errors import UserError
from core.evaluation.headline import HEADLINE
from core.evaluation.published import ambiguous, published, published_file, set_published

FP = "0123456789abcdef"


@pytest.mark.parametrize("key,value", [("knn_accuracy", 0.85), ("sts_spearman", 0.776), ("polarity", 1.0),
                                       ("sts_spearman", -0.2), ("linear_accuracy", "0.5")])
def test_a_value_that_could_be_a_fraction_needs_its_unit(key, value):
    with pytest.raises(UserError, match=r"could be a fraction .* give the unit, fraction or shown \(--unit\)"):
        set_published(FP, key, value)
    assert not published_file().exists()
    as_fraction = set_published(FP, key, value, unit="fraction")
    assert as_fraction.shown == pytest.approx(float(value) * 100)
    as_shown = set_published(FP, key, value, unit="shown")
    assert as_shown.shown == pytest.approx(float(value))


def test_units_that_cannot_apply_are_refused():
    for key, value, unit, words in [("kendall_tau", 0.5, "fraction", "shown as it is"),
                                    ("knn_accuracy", 85.0, "fraction", "between -1 and 1"),
                                    ("knn_accuracy", 0.5, "percent", "one of shown, fraction"),
                                    ("knn_accuracy", 0.5, "", "one of shown, fraction")]:
        with pytest.raises(UserError, match=words):
            set_published(FP, key, value, unit=unit)
    assert set_published(FP, "kendall_tau", 0.5).shown == 0.5  # shown as it is: never ambiguous
    assert set_published(FP, "knn_accuracy", 85.0).shown == 85.0 and not ambiguous("knn_accuracy", 0.0)


def test_minus_zero_is_stored_and_shown_as_zero():
    assert set_published(FP, "kendall_tau", -0.0).text() == "0.000"
    assert set_published(FP, "sts_spearman", "-0").text() == "0.0"
    assert all(m.text(-1e-9) in ("0.0", "0.0%", "0.000") for m in HEADLINE)


def test_every_backup_of_a_corrupt_store_is_kept():
    path = published_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        path.write_text(f"not json {attempt}")
        set_published(FP, "kendall_tau", 0.1 * attempt)
    backups = sorted(p.name for p in path.parent.glob("published.json.bad*"))
    assert backups == ["published.json.bad", "published.json.bad.1", "published.json.bad.2"]
    assert {(path.parent / name).read_text() for name in backups} == {f"not json {i}" for i in range(3)}


def test_an_entry_a_read_skips_is_written_back_by_the_next_write():
    path = published_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    future = {"value": 0.7, "note": "a figure a later version knows"}
    path.write_text(json.dumps({"version": 1, "corpora": {FP: {"ndcg_at_10": future},
                                                           "fedcba9876543210": {"kendall_tau": {"value": "x"}}}}))
    warnings: list[str] = []
    set_published(FP, "kendall_tau", 0.25, warn=warnings.append)
    assert any("kept in the file" in w for w in warnings)
    stored = json.loads(path.read_text())["corpora"]
    assert stored[FP]["ndcg_at_10"] == future and stored[FP]["kendall_tau"]["value"] == 0.25
    assert stored["fedcba9876543210"] == {"kendall_tau": {"value": "x"}}
    set_published("fedcba9876543210", "kendall_tau", 0.5, warn=warnings.append)  # a valid figure replaces it
    assert json.loads(path.read_text())["corpora"]["fedcba9876543210"]["kendall_tau"]["value"] == 0.5
    assert published(FP, warn=warnings.append).keys() == {"kendall_tau"}


def test_cli_unit_flag_and_a_pair_corpus_without_scores(tmp_path, capsys):
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text,label\n" + "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(40)))
    assert main(["published", str(labelled), "--set", "knn_accuracy=0.85"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--unit" in err
    assert main(["published", str(labelled), "--set", "knn_accuracy=0.85", "--unit", "fraction"]) == 0
    assert "85.0%" in capsys.readouterr().out
    assert main(["published", str(labelled), "--unit", "fraction"]) == 2
    assert "give it with --set" in capsys.readouterr().err
    for bad in ("", "Fraction", "x" * 5000):
        assert main(["published", str(labelled), "--set", "knn_accuracy=0.5", "--unit", bad]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    nli = tmp_path / "nli.csv"
    labels = ["entailment", "contradiction"]
    nli.write_text("text1,text2,label\n" + "".join(f"premise {i},hypothesis {i},{labels[i % 2]}\n" for i in range(40)))
    assert main(["published", str(nli), "--set", "sts_spearman=77.6"]) == 2
    err = capsys.readouterr().err.strip()
    assert "without a score column reports no headline figure" in err and len(err.splitlines()) == 1


def test_the_corpus_page_asks_whether_a_small_value_is_a_fraction(app):
    from tests.conftest import button, no_errors, paste_table
    from tests.test_published import pair_csv

    at = paste_table(app, pair_csv())
    no_errors(at)
    at.number_input(key="published_value:sts_spearman").set_value(0.776).run()
    (question,) = [r for r in at.radio if r.key == "published_unit:sts_spearman"]
    assert question.value is None and question.options == ["as the cards show it: saved as 0.776",
                                                            "a fraction: saved as 77.6 (x100)"]
    button(at, "Save figure").click().run()
    assert [e.value for e in at.error][0].startswith("The published STS Spearman 0.776 could be a fraction")
    assert not published_file().exists()
    question.set_value("fraction").run()
    button(at, "Save figure").click().run()
    no_errors(at)
    (entries,) = json.loads(published_file().read_text())["corpora"].values()
    assert entries["sts_spearman"]["value"] == pytest.approx(77.6)


def test_the_corpus_page_keeps_no_figure_for_pairs_without_scores(app):
    from tests.conftest import paste_table

    labels = ["entailment", "contradiction"]
    at = paste_table(app, "text1,text2,label\n" + "".join(f"premise {i},hypothesis {i},{labels[i % 2]}\n"
                                                          for i in range(40)))
    assert not at.exception
    assert not [n for n in at.number_input if str(n.key).startswith("published_value")]
    assert any("reports no STS Spearman" in c.value for c in at.caption)


def test_a_metric_the_corpus_never_reports_is_refused_before_its_unit_is_asked(capsys):
    """`published labelled.csv --set sts_spearman=0.776` asked for --unit first, and with it said that a labelled
    corpus reports no STS Spearman."""
    from core.cli import main
    from core.storage import ASSETS

    assert main(["published", str(ASSETS / "demo_corpus.csv"), "--set", "sts_spearman=0.776"]) == 2
    err = capsys.readouterr().err.strip()
    assert "sts_spearman" in err and "--unit" not in err and len(err.splitlines()) == 1, err
