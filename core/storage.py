"""Where ContrastLab keeps what it writes, and how: the home folder, its sub-folders, cache keys, atomic
writes and the one reader of cache entries.

One module owns these so two callers can never disagree on a path or a key (a caller that built its key
by hand would silently lose every cache hit), and so every file appears whole or not at all: a crash
mid-write leaves a temp file beside the target, never half an entry. Each cache entry has a sidecar with
its size, checksum and shape, so a truncated, garbled or wrong-shaped entry (a full disk, a copy gone wrong)
is recomputed with one warning instead of failing, or silently skewing, every later run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")
_log = logging.getLogger("contrastlab.cache")

REPO_ROOT = Path(__file__).resolve().parents[1]
ASSETS = REPO_ROOT / "assets"
STALE_TMP_S = 3600.0  # a cache temp file untouched this long has no live writer (remove_stale_temps)


def home() -> Path:
    """CONTRASTLAB_HOME (tests, shared installs), else `.contrastlab` in the repository."""
    env = os.environ.get("CONTRASTLAB_HOME")
    return Path(env) if env else REPO_ROOT / ".contrastlab"


def cache_dir(kind: str) -> Path:
    """home/cache/<kind>: 'embeddings', 'projections', 'examples', 'results', 'fingerprints', ...; clearing home/cache
    clears them all."""
    return home() / "cache" / kind


def exports_dir() -> Path:
    return home() / "exports"


def encode_rates_file() -> Path:
    """This machine's measured encoding rates (core.models.rates), beside the caches: clearing them clears it."""
    return home() / "cache" / "encode_rates.json"


def corpora_dir() -> Path:
    """Uploaded tables saved for background runs (data.content.persist_table)."""
    return home() / "corpora"


# ---------------------------------------------------------------- keys


def texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for t in texts:
        digest.update(t.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()[:16]


def array_fingerprint(array: np.ndarray) -> str:
    """Content hash of an array (shape, dtype, bytes): a changed embedding never reads a stale entry."""
    a = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{a.shape}|{a.dtype.str}|".encode())
    digest.update(a.tobytes())
    return digest.hexdigest()[:16]


def _jsonable(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        return array_fingerprint(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot use {type(obj).__name__} in a cache key")


def key_hash(key_parts: object) -> str:
    """Stable hash of str / numbers / None / nested tuples, lists and dicts (arrays by content)."""
    text = json.dumps(key_parts, default=_jsonable, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def embeddings_entry(model_fingerprint: str, texts: Sequence[str], kind: str) -> Path:
    """A model's 'pooled' or 'layers' encoding of these texts.

    Keyed by the weights' fingerprint, so a fine-tuned model never reads the reference model's entry. The
    pooling is part of the model and of its fingerprint; '-model-' keeps the entries of earlier versions valid.
    """
    return cache_dir("embeddings") / f"{model_fingerprint}-{texts_hash(texts)}-model-{kind}.npy"


def projection_entry(key_parts: object) -> Path:
    """A 2-D map, keyed by what it was computed from (analysis.projection builds the parts)."""
    return cache_dir("projections") / f"{key_hash(key_parts)}.npy"


def result_entry(key_parts: object) -> Path:
    """An evaluation's result (a JSON object), keyed by the fingerprints of the models, the corpus and the settings
    it was computed from (core.evaluation.corpus_eval builds the parts)."""
    return cache_dir("results") / f"{key_hash(key_parts)}.json"


def fingerprint_entry(key_parts: object) -> Path:
    """A saved model's fingerprint, keyed by its folder's files (core.models.loading.remember_fingerprint)."""
    return cache_dir("fingerprints") / f"{key_hash(key_parts)}.json"


def items_entry(ref: str) -> Path:
    """What an evaluation kept of each test item (core.evaluation.items), named by the hash of its result's key."""
    return cache_dir("items") / f"{ref}.npz"


def examples_entry(corpus_key: str, model_fingerprint: str, fmt: str, settings: Sequence[object]) -> Path:
    """Mined examples: a Parquet frame, its stats in the entry's sidecar (cached_frame)."""
    payload = json.dumps([corpus_key, model_fingerprint, fmt, *settings])
    return cache_dir("examples") / f"{hashlib.sha256(payload.encode()).hexdigest()[:16]}.parquet"


# ---------------------------------------------------------------- atomic writes


@contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """A temp path beside `path`, renamed into place (atomic on one file system) when the block ends, removed when
    it raises (a cancel included)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temps(max_age_s: float = STALE_TMP_S) -> int:
    """Delete the cache's temp files (`_atomic`) untouched for `max_age_s`: a writer killed mid-write (out of
    memory, kill -9) never removed its own. A live writer keeps touching its file, so a recent one is left alone.
    Returns how many were removed."""
    removed, now = 0, time.time()
    for tmp in (home() / "cache").rglob(".*.tmp"):
        try:
            if now - tmp.stat().st_mtime > max_age_s:
                tmp.unlink()
                removed += 1
        except OSError:  # removed by another process meanwhile
            continue
    return removed


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call write(tmp) on a temp path beside `path`, then rename it into place."""
    with _atomic(path) as tmp:
        write(tmp)


# ---------------------------------------------------------------- cache entries


def _sidecar(path: Path) -> Path:
    """`<entry>.json`: the entry's checksum, size and shape (and a frame's stats), written after the body."""
    return path.with_name(path.name + ".json")


def _checksum(path: Path) -> str:
    """CRC-32 of the file: it catches truncated and garbled bodies (not tampering), at several times the speed of
    SHA-256 on the large embedding entries every page draw reads."""
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


def _fits(found: Sequence[object], expected: Sequence[object] | None) -> bool:
    """Whether a stored shape (or column list) is what the caller needs; None in `expected` matches anything."""
    return expected is None or (len(found) == len(expected) and all(e is None or e == f for f, e in
                                                                    zip(found, expected)))


@contextmanager
def _entry(path: Path, meta: dict) -> Iterator[Path]:
    """The temp path the block writes the body to; renamed into place, then its sidecar written. The old sidecar goes
    first, so a crash in between leaves a miss, never a sidecar that vouches for another body."""
    _sidecar(path).unlink(missing_ok=True)
    with _atomic(path) as tmp:
        yield tmp
    meta = {**meta, "bytes": path.stat().st_size, "crc32": _checksum(path)}
    write_atomic(_sidecar(path), lambda tmp: tmp.write_text(json.dumps(meta)))


def _load_entry(path: Path, load: Callable[[Path, dict], T], key: str, expected: Sequence[object] | None
                ) -> T | None:
    """load(path, sidecar) of a sound entry, else None. ONE reader for every cache: an entry whose size, checksum or
    shape (`key` in its sidecar vs `expected`) is wrong, or that fails to load, is deleted with one warning, so the
    caller recomputes it once and every later read is a hit. An entry without a sidecar was never finished (or
    comes from a version without sidecars): a silent miss."""
    sidecar = _sidecar(path)
    if not (path.exists() and sidecar.exists()):
        return None
    try:
        meta = json.loads(sidecar.read_text())
        if path.stat().st_size != meta["bytes"]:
            problem = f"it has {path.stat().st_size:,} bytes instead of {meta['bytes']:,}"
        elif _checksum(path) != meta["crc32"]:
            problem = "its contents do not match their checksum"
        elif not _fits(meta[key], expected):
            wanted = ", ".join("any" if e is None else str(e) for e in expected or [])
            problem = f"its {key} is {meta[key]}, not [{wanted}]"
        else:
            return load(path, meta)
    except Exception as exc:  # a cache holds only what can be recomputed: no way it fails to read may stop a run
        problem = f"it could not be read ({type(exc).__name__})"
    _log.warning("Cache entry %s/%s was unusable (%s); deleted it and computing it again.",
                 path.parent.name, path.name, problem)
    path.unlink(missing_ok=True)
    sidecar.unlink(missing_ok=True)
    return None


def save_array(path: Path, array: np.ndarray) -> None:
    with _entry(path, {"shape": list(np.shape(array))}) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


@contextmanager
def streamed_array(path: Path, shape: tuple[int, ...], dtype: np.dtype | type = np.float32) -> Iterator[np.ndarray]:
    """An array entry filled in place: the block writes into a memmap of the entry's temp file piece by piece (a long
    encode, batch by batch, so the whole result is never built in memory first), then it is flushed and saved as
    save_array saves one, sidecar last. A block that raises (a cancel included) leaves no entry."""
    with _entry(path, {"shape": list(shape)}) as tmp:
        array = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
        yield array
        array.flush()


def load_array(path: Path, shape: Sequence[int | None] | None = None) -> np.ndarray | None:
    """The cached array, or None when absent or unusable; `shape` (None = any size on that axis) is what the
    caller needs, so an entry for other texts is never returned."""
    return _load_entry(path, lambda p, _meta: np.load(p, allow_pickle=False), "shape", shape)


def cached_array(path: Path, compute: Callable[[], np.ndarray], shape: Sequence[int | None] | None = None
                 ) -> np.ndarray:
    """The array cached at `path`, or compute() saved there atomically."""
    found = load_array(path, shape)
    if found is not None:
        return found
    result = np.asarray(compute())
    save_array(path, result)
    return result


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Several named arrays as one entry (an uncompressed .npz): what one evaluation kept of each test item."""
    with _entry(path, {"shape": sorted(arrays)}) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def load_arrays(path: Path) -> dict[str, np.ndarray] | None:
    """The named arrays save_arrays stored, or None when absent or unusable."""
    def load(p: Path, _meta: dict) -> dict[str, np.ndarray]:
        with np.load(p, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}

    return _load_entry(path, load, "shape", None)


def _plain(obj: object) -> object:
    """numpy scalars and arrays as the JSON numbers and lists they hold."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} as JSON")


def cached_json(path: Path, compute: Callable[[], dict]) -> dict:
    """The JSON object cached at `path`, or compute() saved there atomically."""
    found = _load_entry(path, lambda p, _meta: json.loads(p.read_text()), "shape", None)
    if isinstance(found, dict):
        return found
    result = compute()
    with _entry(path, {"shape": []}) as tmp:
        tmp.write_text(json.dumps(result, default=_plain))
    return result


def cached_frame(path: Path, compute: Callable[[], tuple[pd.DataFrame, dict]], columns: Sequence[str]
                 ) -> tuple[pd.DataFrame, dict]:
    """(frame, stats) cached at `path` (Parquet; the stats live in its sidecar), or compute() saved there."""
    def load(p: Path, meta: dict) -> tuple[pd.DataFrame, dict]:
        import pandas as pd  # here, not at the top: `python -m core runs` imports storage and must start fast

        return pd.read_parquet(p), meta["stats"]

    found = _load_entry(path, load, "columns", list(columns))
    if found is not None:
        return found
    frame, stats = compute()
    with _entry(path, {"columns": list(frame.columns), "rows": len(frame), "stats": stats}) as tmp:
        frame.to_parquet(tmp, index=False)
    return frame, stats
