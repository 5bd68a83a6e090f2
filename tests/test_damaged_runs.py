"""A run store row whose JSON cannot be read (edited by hand, a torn write) made `runs` and `compare` crash with a
traceback for every run (issue 33): the run is shown as damaged, the others as usual, and comparing it is one line."""

from __future__ import annotations

import sqlite3

import pytest

from core.cli import main
from core.runs.store import DAMAGED, RunStore
from core.storage import home


def _runs(n: int) -> list[str]:
    store = RunStore()
    ids = []
    for i in range(n):
        run_id = store.create("train", {"recipe": "triplet", "corpus": "c.csv", "seed": i})
        store.mark_done(run_id, metrics_after={"k": 16, "polarity": 0.5, "similarity": 0.4},
                        artefacts={"model": "/nowhere"})
        ids.append(run_id)
    return ids


def _corrupt(run_id: str, column: str, text: str, table: str = "runs") -> None:
    con = sqlite3.connect(home() / "runs.sqlite")
    key = "id" if table == "runs" else "run_id"
    with con:
        con.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (text, run_id))
    con.close()


@pytest.mark.parametrize("column,text", [("metrics_after", "{\"k\": 16, \"polar"), ("config", "[1, 2]"),
                                         ("artefacts", "null"), ("tags", "{}"), ("progress", "\x00")])
def test_runs_lists_a_damaged_run_as_damaged_and_the_others_as_usual(column, text, capsys):
    good, bad = _runs(2)
    _corrupt(bad, column, text)
    assert main(["runs"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert DAMAGED in lines[bad] and column in lines[bad]
    assert DAMAGED not in lines[good] and "P@16" in lines[good]
    assert main(["compare", bad, good]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and bad in err and DAMAGED in err, err
    run = RunStore().get(bad)
    assert isinstance(run.config, dict) and isinstance(run.tags, list) and isinstance(run.artefacts, dict)
    # an export would write an empty config ({}) or card figures as the run's: refused, except for damaged tags
    assert main(["export", bad, "--out", str(home() / "exports")]) == 2
    err = capsys.readouterr().err.strip()
    wanted = DAMAGED if column != "tags" else "has no saved model"  # the model folder of _runs does not exist
    assert len(err.splitlines()) == 1 and wanted in err, err


def test_a_history_point_that_cannot_be_read_is_left_out_of_the_curve():
    (run_id,) = _runs(1)
    store = RunStore()
    for step in (1, 2, 3):
        store.add_history(run_id, {"step": step, "polarity": 0.1 * step})
    con = sqlite3.connect(home() / "runs.sqlite")
    with con:
        con.execute("UPDATE history SET point = 'not json' WHERE rowid = (SELECT MIN(rowid) FROM history)")
    con.close()
    run = store.get(run_id)
    assert [p["step"] for p in run.history] == [2, 3]
    assert run.error.startswith(DAMAGED) and "history" in run.error
