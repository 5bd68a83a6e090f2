"""Where ContrastLab keeps what it writes, and how: the home folder, its sub-folders, cache keys and
atomic writes.

One module owns these so two callers can never disagree on a path or a key (a caller that built its key
by hand would silently lose every cache hit), and so every file appears whole or not at all: a crash
mid-write leaves a temp file beside the target, never half an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
ASSETS = REPO_ROOT / "assets"


def home() -> Path:
    """CONTRASTLAB_HOME (tests, shared installs), else `.contrastlab` in the repository."""
    env = os.environ.get("CONTRASTLAB_HOME")
    return Path(env) if env else REPO_ROOT / ".contrastlab"


def cache_dir(kind: str) -> Path:
    """home/cache/<kind>: 'embeddings', 'projections', 'examples'; clearing home/cache clears them all."""
    return home() / "cache" / kind


def exports_dir() -> Path:
    return home() / "exports"


def corpora_dir() -> Path:
    """Uploaded tables saved for background runs (data.corpus.persist_table)."""
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


def examples_entry(corpus_key: str, model_fingerprint: str, fmt: str, settings: Sequence[object]) -> Path:
    """Mined examples (a .parquet frame and a .json of stats share this stem)."""
    payload = json.dumps([corpus_key, model_fingerprint, fmt, *settings])
    return cache_dir("examples") / hashlib.sha256(payload.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- atomic writes


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call write(tmp) on a temp path beside `path`, then rename it into place (atomic on one file system)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_array(path: Path, array: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, array)

    write_atomic(path, write)


def load_array(path: Path) -> np.ndarray | None:
    """The cached array, or None when absent; a corrupt entry is removed and recomputed, not trusted."""
    if not path.exists():
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError):
        path.unlink(missing_ok=True)
        return None


def cached_array(path: Path, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The array cached at `path`, or compute() saved there atomically."""
    found = load_array(path)
    if found is not None:
        return found
    result = np.asarray(compute())
    save_array(path, result)
    return result
