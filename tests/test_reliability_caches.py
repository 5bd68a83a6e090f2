"""Issue 12, item 5: every cache (embeddings, projections, mined examples) heals from a bad entry.

A zero-byte, truncated, garbled (same size) or wrong-shaped entry is deleted and recomputed with one warning,
and the next read is a plain hit: never an EOFError, an IndexError or NaN metrics from a cache.
"""

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import core.data.bands as bands
import core.data.mining as mining
import core.models.encode as enc
from core.analysis.projection import cached_projection
from core.data.corpus import demo_corpus_path
from core.storage import cache_dir, cached_array, cached_frame, load_array, save_array, streamed_array

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["the cat sat", "a dog ran", "stocks fell", "rain today", "the cat ran"]
CACHE_LOG = "contrastlab.cache"


def zero_byte(path: Path) -> None:
    path.write_bytes(b"")


def truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garbled(path: Path) -> None:
    """The middle third replaced by random bytes: same size, a readable header, a body that is not ours."""
    data = bytearray(path.read_bytes())
    third = len(data) // 3
    data[third : 2 * third] = np.random.default_rng(0).bytes(third)
    path.write_bytes(bytes(data))


FAULTS = [zero_byte, truncated, garbled]


def body(kind: str) -> Path:
    """The one cache entry of this kind (its checksum sidecar is not the entry)."""
    (path,) = [p for p in cache_dir(kind).iterdir() if p.suffix in (".npy", ".parquet")]
    return path


def cache_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == CACHE_LOG and r.levelno == logging.WARNING]


# ---------------------------------------------------------------- embeddings


@pytest.mark.parametrize("layers", [False, True], ids=["pooled", "layers"])
@pytest.mark.parametrize("fault", FAULTS)
def test_a_bad_embeddings_entry_is_recomputed_once_with_one_warning(tiny_model, layers, fault, monkeypatch, caplog):
    first = enc.encode_cached(tiny_model, TEXTS, layers=layers)
    kind = "layers" if layers else "pooled"
    (path,) = cache_dir("embeddings").glob(f"*-{kind}.npy")
    fault(path)
    again = enc.encode_cached(tiny_model, TEXTS, layers=layers)
    np.testing.assert_allclose(again, first, atol=1e-6)
    assert len(cache_warnings(caplog)) == 1 and path.name in cache_warnings(caplog)[0]
    monkeypatch.setattr(enc, "encode", lambda *a, **k: pytest.fail("healed entry not used"))
    np.testing.assert_allclose(enc.encode_cached(tiny_model, TEXTS, layers=layers), first, atol=1e-6)
    assert len(cache_warnings(caplog)) == 1


def test_an_embeddings_entry_of_the_wrong_shape_is_recomputed(tiny_model, caplog):
    first = enc.encode_cached(tiny_model, TEXTS)
    (path,) = cache_dir("embeddings").glob("*-pooled.npy")
    save_array(path, first[:-1])  # a whole, well-formed entry for one text fewer
    again = enc.encode_cached(tiny_model, TEXTS)
    assert again.shape == first.shape and len(cache_warnings(caplog)) == 1


def test_a_garbled_body_never_reaches_the_metrics(tiny_model):
    """Random bytes in a float32 body load as NaN / huge values: the checksum has to catch it."""
    first = enc.encode_cached(tiny_model, TEXTS)
    path = body("embeddings")
    header = path.stat().st_size - first.nbytes
    data = bytearray(path.read_bytes())
    data[header:] = np.full(first.shape, np.nan, dtype=np.float32).tobytes()
    path.write_bytes(bytes(data))
    assert np.isfinite(enc.encode_cached(tiny_model, TEXTS)).all()


def test_an_entry_without_its_checksum_is_a_silent_miss(tiny_model, caplog):
    """A crash between the body and its sidecar (or an entry from an earlier version) is recomputed, not trusted."""
    first = enc.encode_cached(tiny_model, TEXTS)
    path = body("embeddings")
    np.save(path, np.zeros_like(first))
    for sidecar in cache_dir("embeddings").glob("*.json"):
        sidecar.unlink()
    np.testing.assert_allclose(enc.encode_cached(tiny_model, TEXTS), first, atol=1e-6)
    assert cache_warnings(caplog) == []


@pytest.mark.parametrize("sidecar", ["", "{not json", "[1, 2]", '{"bytes": "many"}'])
def test_a_garbled_sidecar_is_healed(sidecar, caplog):
    path = cache_dir("embeddings") / "x.npy"
    cached_array(path, lambda: np.ones((2, 3)))
    next(cache_dir("embeddings").glob("*.json")).write_text(sidecar)
    assert cached_array(path, lambda: np.zeros((2, 3))).sum() == 0 and len(cache_warnings(caplog)) == 1


def test_a_frame_sidecar_without_its_stats_is_healed(caplog):
    path = cache_dir("examples") / "x.parquet"
    frame = pd.DataFrame({"anchor": ["a", "b"]})
    cached_frame(path, lambda: (frame, {"examples": 2}), ["anchor"])
    sidecar = path.with_name(path.name + ".json")
    sidecar.write_text(sidecar.read_text().replace('"stats"', '"other"'))
    again, stats = cached_frame(path, lambda: (frame, {"examples": 2}), ["anchor"])
    assert again.equals(frame) and stats == {"examples": 2} and len(cache_warnings(caplog)) == 1


def test_load_array_checks_the_expected_shape():
    path = cache_dir("embeddings") / "x.npy"
    save_array(path, np.ones((4, 3), dtype=np.float32))
    assert load_array(path, shape=(4, None)).shape == (4, 3)
    assert load_array(path, shape=(5, None)) is None
    assert not path.exists()


def test_a_streamed_entry_reads_back_like_a_saved_one():
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    saved, streamed = cache_dir("embeddings") / "saved.npy", cache_dir("embeddings") / "streamed.npy"
    save_array(saved, values)
    with streamed_array(streamed, values.shape) as out:
        for row in (3, 0, 2, 1):  # filled piece by piece, in any order
            out[row] = values[row]
    np.testing.assert_array_equal(load_array(streamed, (4, None)), values)
    assert streamed.read_bytes() == saved.read_bytes()
    assert [p.name for p in cache_dir("embeddings").glob(".*")] == []  # no temp file left


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError])
def test_an_interrupted_streamed_rewrite_leaves_a_silent_miss(error, caplog):
    """The old sidecar goes first, so the old body is never vouched for by the new entry's checksum, and the half
    written temp file is removed."""
    path = cache_dir("embeddings") / "x.npy"
    save_array(path, np.ones((4, 3), dtype=np.float32))
    with pytest.raises(error), streamed_array(path, (4, 3)) as out:
        out[0] = 2.0
        raise error()
    assert load_array(path, (4, 3)) is None and cache_warnings(caplog) == []
    assert sorted(p.name for p in cache_dir("embeddings").iterdir()) == ["x.npy"]


# ---------------------------------------------------------------- projections


@pytest.mark.parametrize("fault", FAULTS)
def test_a_bad_projection_is_recomputed_once_with_one_warning(fault, caplog):
    calls = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.arange(20, dtype=np.float32).reshape(10, 2)

    key = ("tsne", "abc", 0, {}, "init", None)
    first = cached_projection(key, compute, rows=10)
    fault(body("projections"))
    np.testing.assert_array_equal(cached_projection(key, compute, rows=10), first)
    np.testing.assert_array_equal(cached_projection(key, compute, rows=10), first)
    assert len(calls) == 2 and len(cache_warnings(caplog)) == 1


def test_a_projection_of_the_wrong_shape_is_recomputed(caplog):
    key = ("umap", "abc")
    cached_projection(key, lambda: np.ones((9, 2)), rows=9)  # stored for another number of points
    assert cached_projection(key, lambda: np.zeros((10, 2)), rows=10).shape == (10, 2)
    assert len(cache_warnings(caplog)) == 1


# ---------------------------------------------------------------- mined examples


def _toy(n_per: int = 15) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], n_per)
    emb = rng.normal(size=(3, 8))[labels] + rng.normal(size=(len(labels), 8)) * 0.8
    return emb.astype(np.float32), labels, [f"text {i}" for i in range(len(labels))]


def _mine_triplets(model, monkeypatch, calls: list) -> mining.Examples:
    emb, labels, texts = _toy()
    monkeypatch.setattr(mining, "encode_cached", lambda *a, **k: calls.append(1) or emb)
    return mining.mine(model, texts, labels, "triplet", mining.MiningSettings(k=3, threshold=-1.0))


def _mine_bands(model, monkeypatch, calls: list) -> mining.Examples:
    emb, labels, texts = _toy()
    monkeypatch.setattr(bands, "encode_cached", lambda *a, **k: calls.append(1) or emb)
    settings = bands.BandSettings((2, 4, 6, 8), mining.MiningSettings(k=3, threshold=-1.0))
    return bands.mine_bands(model, texts, labels, settings)


@pytest.mark.parametrize("mine", [_mine_triplets, _mine_bands], ids=["mining", "bands"])
@pytest.mark.parametrize("fault", FAULTS)
def test_bad_mined_examples_are_recomputed_once_with_one_warning(tiny_model, mine, fault, monkeypatch, caplog):
    calls: list = []
    first = mine(tiny_model, monkeypatch, calls)
    fault(body("examples"))
    again = mine(tiny_model, monkeypatch, calls)
    pd.testing.assert_frame_equal(again.frame, first.frame)
    assert again.stats == first.stats and len(calls) == 2 and len(cache_warnings(caplog)) == 1
    mine(tiny_model, monkeypatch, calls)
    assert len(calls) == 2 and len(cache_warnings(caplog)) == 1


def test_mined_examples_with_other_columns_are_recomputed(tiny_model, monkeypatch, caplog):
    calls: list = []
    first = _mine_triplets(tiny_model, monkeypatch, calls)
    path = body("examples")
    for entry in cache_dir("examples").iterdir():
        entry.unlink()
    cached_frame(path, lambda: (first.frame[["anchor"]], {}), ["anchor"])  # a whole entry of another format
    again = _mine_triplets(tiny_model, monkeypatch, calls)
    assert list(again.frame.columns) == ["anchor", "positive", "negative"] and len(cache_warnings(caplog)) == 1


# ---------------------------------------------------------------- the CLI says it once, on stderr


def test_the_cli_warns_once_on_stderr_and_gives_the_same_numbers(tiny_model_dir, contrastlab_home, capsys, caplog):
    """The damaged read runs as a user runs it, in its own process, so its warnings are seen on its stderr; the
    evaluations that fill the cache and read it back healed run in this one (no model import of their own)."""
    from core.cli import main

    args = ["evaluate", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--json"]
    assert main(args) == 0
    first = capsys.readouterr().out
    for path in cache_dir("embeddings").glob("*.npy"):
        path.write_bytes(b"")
    for path in cache_dir("results").glob("*[0-9a-f].json"):  # the entries, not their .json.json sidecars
        path.write_text("{")  # the evaluation's result too: read back, it would spare the embeddings
    second = subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first and "Traceback" not in second.stderr
    lines = [line for line in second.stderr.splitlines() if "cache" in line.lower()]
    # one line for the result and one per embedding entry it read again (the pooled ones: the scores need no layers)
    assert len(lines) == 1 + len(list(cache_dir("embeddings").glob("*-pooled.npy"))) >= 3
    caplog.clear()
    assert main(args) == 0 and capsys.readouterr().out == first
    assert not cache_warnings(caplog)


def test_a_worker_start_removes_temp_files_a_killed_writer_left(contrastlab_home):
    """Issue 26: a worker killed while writing a cache entry left `.<entry>.<random>.tmp` for good."""
    from core.jobs import worker
    from core.runs.store import RunStore

    folder = cache_dir("embeddings")
    folder.mkdir(parents=True)
    stale, fresh = folder / ".abc-model-text.npy.k3j2.tmp", folder / ".def-model-text.npy.x9q1.tmp"
    stale.write_bytes(b"half an entry")
    fresh.write_bytes(b"being written now")
    hour_ago = stale.stat().st_mtime - 2 * 3600
    os.utime(stale, (hour_ago, hour_ago))
    store = RunStore()
    run_id = store.create("wait", {"steps": 1, "step_s": 0.0})
    assert worker.main([str(store.root), run_id]) == 0
    assert not stale.exists() and fresh.exists()  # a recent one may belong to a live writer
