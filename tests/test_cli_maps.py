"""`python -m core maps` on the demo corpus with the tiny model: the files it writes (HTML, PNG, Parquet), the JSON
it prints, that it reads the Maps page's cache, and one line with exit 2 for every bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.analysis.maps import MAX_POINTS, point_options
from core.cli import main
from core.data.corpus import demo_corpus_path
from core.runs.store import RunStore
from tests.tiny_model import build_tiny_model

KEYS = {"n_points", "seconds_reference", "seconds_aligned", "neighbours_kept", "method", "run_id", "files"}
POINTS = 60
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def cls_model_dir(tmp_path_factory) -> Path:
    """The tiny model's weights with CLS pooling: another embedding of the same texts, as a fine-tuned model gives."""
    return build_tiny_model(tmp_path_factory.mktemp("cls") / "model", pooling="cls")


def make_run(model_dir: Path | None, base: str, status: str = "done") -> str:
    """A training run in the store as a finished (or running / queued / failed) run leaves it."""
    store = RunStore()
    run_id = store.create("train", {"corpus": str(demo_corpus_path()), "model": base, "recipe": "mnrl"})
    if status != "queued":
        store.mark_running(run_id, os.getpid())
    if status == "done":
        store.mark_done(run_id, artefacts={"model": str(model_dir)})
    elif status == "failed":
        store.mark_failed(run_id, "out of memory")
    return run_id


def maps(*args: str) -> int:
    return main(["maps", str(demo_corpus_path()), *args])


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, lines
    return lines[0]


def test_reference_map_alone_writes_html_png_parquet_and_reads_the_cache(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "new" / "maps"  # created, parents included
    args = ["--model", str(tiny_model_dir), "--max-points", str(POINTS), "--out", str(out), "--json"]
    assert maps(*args) == 0
    first = json.loads(capsys.readouterr().out)
    assert set(first) == KEYS
    assert first["n_points"] == POINTS and first["method"] == "tsne" and first["seconds_reference"] > 0
    assert first["seconds_aligned"] is None and first["neighbours_kept"] is None and first["run_id"] is None
    assert sorted(Path(f).name for f in first["files"]) == ["reference.html", "reference.parquet", "reference.png"]
    assert sorted(p.name for p in out.iterdir()) == ["reference.html", "reference.parquet", "reference.png"]  # no temp

    frame = pd.read_parquet(out / "reference.parquet")
    assert list(frame.columns) == ["text", "label", "split", "x", "y"] and len(frame) == POINTS
    assert np.isfinite(frame[["x", "y"]].to_numpy()).all() and frame["text"].is_unique
    assert set(frame["label"]) == set(pd.read_csv(demo_corpus_path())["label"])  # stratified: every class is there
    assert (out / "reference.png").read_bytes()[:8] == PNG_MAGIC and (out / "reference.png").stat().st_size > 10_000
    html = (out / "reference.html").read_text()
    assert "Plotly.newPlot" in html and '<script src="http' not in html  # plotly.js inline: opens offline
    assert len(html) > 3_000_000
    assert "Reference \\u00b7 kNN accuracy" in html  # the title, as plotly.py writes it into the figure JSON

    # Same input again: both the map and its seconds come from the Maps page's disk cache, the files are replaced.
    assert maps(*args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["seconds_reference"] < first["seconds_reference"] and second["seconds_reference"] < 0.5
    pd.testing.assert_frame_equal(pd.read_parquet(out / "reference.parquet"), frame)


def test_with_a_run_writes_both_maps_and_how_many_neighbours_the_aligned_one_kept(tiny_model_dir, cls_model_dir,
                                                                                   tmp_path, capsys):
    run_id = make_run(cls_model_dir, str(tiny_model_dir))
    out = tmp_path / "maps"
    # Without --model the run's reference model draws the reference map, as on the Maps page.
    assert maps("--run", run_id, "--max-points", str(POINTS), "--out", str(out), "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["run_id"] == run_id and result["n_points"] == POINTS
    assert result["seconds_aligned"] > 0 and 0 < result["neighbours_kept"] <= 1
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{stem}.{ext}" for stem in ("reference", "tuned") for ext in ("html", "parquet", "png"))
    ref, tuned = (pd.read_parquet(out / f"{stem}.parquet") for stem in ("reference", "tuned"))
    assert ref[["text", "label", "split"]].equals(tuned[["text", "label", "split"]])  # the same texts, row by row
    assert not np.allclose(ref[["x", "y"]], tuned[["x", "y"]])
    assert "Fine-tuned \\u00b7 kNN accuracy" in (out / "tuned.html").read_text()

    # Text output: one summary line, then the files.
    assert maps("--run", run_id, "--max-points", str(POINTS), "--out", str(out)) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith(f"{POINTS} texts; reference map ") and "fine-tuned map" in text[0]
    assert len(text) == 7 and text[1].endswith("reference.html")


@pytest.mark.parametrize("value", ["0", "-1", "4", "nan", "inf", "-inf", "2.5", "abc", "", "1e300", "10" * 40,
                                   str(MAX_POINTS.high + 1)])
def test_bad_max_points_exit_2_with_one_line_before_any_work(value, tmp_path, capsys):
    # --model names no model at all: the value is refused before anything is loaded.
    assert maps("--model", "no-such-model", f"--max-points={value}", "--out", str(tmp_path)) == 2
    line = error_line(capsys)
    assert line.startswith("error: max_points must be a whole number in [5, 1000000], got ")
    assert len(line) < 120


def test_huge_but_allowed_max_points_draws_every_text(tiny_model_dir, tmp_path, capsys):
    assert maps("--model", str(tiny_model_dir), "--max-points", str(MAX_POINTS.high), "--out", str(tmp_path),
                "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_points"] == len(pd.read_parquet(tmp_path / "reference.parquet")) < MAX_POINTS.high


def test_unknown_and_unfinished_runs_exit_2_with_one_line(tiny_model_dir, tmp_path, capsys):
    assert maps("--run", "20990101-000000-000-abcdef", "--out", str(tmp_path)) == 2
    assert error_line(capsys).startswith("error: No run with id '20990101-000000-000-abcdef'")
    for status in ("queued", "running", "failed"):
        run_id = make_run(None, str(tiny_model_dir), status)
        assert maps("--run", run_id, "--out", str(tmp_path)) == 2
        assert error_line(capsys) == (f"error: Run {run_id} is {status} and has no model to compare; pick a "
                                      "finished training run.")


def test_unwritable_out_exits_2_with_one_line(tmp_path, capsys):
    a_file = tmp_path / "maps.txt"
    a_file.write_text("not a folder")
    assert maps("--out", str(a_file)) == 2
    assert error_line(capsys) == f"error: {a_file} is a file; name a folder to write the maps into (it is created " \
                                 "if missing)."
    assert maps("--out", str(a_file / "below")) == 2
    assert error_line(capsys).startswith(f"error: Could not write the maps into {a_file / 'below'}: ")
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert maps("--out", str(locked)) == 2
        assert error_line(capsys).startswith(f"error: Could not write the maps into {locked}: ")
    assert a_file.read_text() == "not a folder"


def test_a_corpus_without_labels_exits_2_with_one_line(tmp_path, capsys):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("text1,text2,score\na cat sat,a cat sits,4.5\na dog ran,stocks fell,0.5\n")
    assert main(["maps", str(pairs), "--out", str(tmp_path / "o")]) == 2
    assert error_line(capsys) == (f"error: Maps colour texts by their label, so they need a labelled corpus (text, "
                                  f"label); {pairs} is a pair corpus (text1, text2, score or label).")
    texts = tmp_path / "texts.csv"
    texts.write_text("text\nhello there\ngeneral kenobi\n")
    assert main(["maps", str(texts), "--out", str(tmp_path / "o")]) == 2
    assert "label" in error_line(capsys)
    assert main(["maps", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2
    error_line(capsys)


def test_unknown_method_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        maps("--method", "pca", "--out", str(tmp_path))
    assert exit_.value.code == 2
    assert "invalid choice: 'pca'" in capsys.readouterr().err


def test_point_options_reach_50000_for_a_corpus_that_large():
    assert point_options(60_000)[-2:] == [20_000, 50_000]  # no "all 60,000": beyond the largest size
    assert point_options(50_000)[-1] == 50_000
    assert point_options(10_872)[-3:] == [5_000, 10_000, 10_872]
    assert point_options(100) == [100] and point_options(250) == [250]
