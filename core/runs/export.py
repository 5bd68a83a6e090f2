"""Export a finished run: the sentence-transformers model directory (with its card and config.yaml) and a zip of it,
the run config as YAML and JSON, and embeddings as Parquet and NumPy and as the TSV pair (vectors, metadata) that
the TensorBoard embedding projector loads.

The exported config is portable: it names the corpus (and any other file the run read) by file name and content,
not by a path on this machine, so `python -m core train --config config.yaml` trains on another machine, finding
the file there or asking for it (core.training.config.portable, TrainConfig.from_file)."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from core.data.content import given_file_name
from core.data.kinds import kind_of, load_any
from core.errors import UserError, os_error
from core.models.loading import load_model
from core.runs.labels import knob_name, knob_value, own_settings_text
from core.runs.store import Run, RunStore
from core.training.config import corpus_options, portable


EXPORT_NAME_CHARS = 100  # an export folder's name at most: room for a run id and the settings that tell it apart


def safe_name(name: str, limit: int = 80) -> str:
    """A file name that is safe on every OS: letters, digits, '.', '_' and '-' only, no leading dot."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    return cleaned[:limit] or "export"


def knob_letter(recipe: str) -> str:
    """What an export's folder name calls a recipe's knob: m for a margin, s for a scale, w, I (its name's last word,
    its first letter where longer): a CoSENT run's folder read 'cosent-m20.0', a scale shown as a margin."""
    word = (knob_name(recipe) or "margin").split()[-1]
    return word if len(word) == 1 else word[0]


def export_name(run) -> str:
    """contrastlab-<recipe>-<knob letter><knob>-<its settings off their defaults>-<run id>: the folder says what tells
    the run apart from its recipe's other runs (two RAOE runs that differ only in their teacher); cut before the id,
    never in it."""
    cfg = run.config
    knob = knob_value(cfg)
    tag = "-".join(p for p in (str(cfg.get("recipe", run.kind)),
                               f"{knob_letter(str(cfg.get('recipe', '')))}{knob}" if knob is not None else "",
                               own_settings_text(run, sep="-")) if p)
    stem = safe_name(f"contrastlab-{tag}", limit=EXPORT_NAME_CHARS - len(run.id) - 1)
    return safe_name(f"{stem}-{run.id}", limit=EXPORT_NAME_CHARS)


EXPORTED = {"config", "progress", "metrics_before", "metrics_after", "artefacts"}  # stored fields an export writes


def finished_model(store: RunStore, run_id: str) -> Path:
    """The model directory of a done run; anything else is refused (no partial model is ever exported)."""
    run = store.get(run_id)
    if set(run.damaged) & EXPORTED:  # the export would carry an empty config or card figures as if they were the run's
        raise UserError(f"Run {run_id} has a {run.error}; an export would leave that out, so it is not exported.")
    if run.status != "done":
        raise UserError(f"Run {run_id} is {run.status}; only finished runs can be exported.")
    path = Path(run.artefacts.get("model", ""))
    if not (path / "modules.json").exists():
        raise UserError(f"Run {run_id} has no saved model to export.")
    return path


CONFIG_FILE = "config.yaml"  # the name the model card and README give the config to train from
RUN_CONFIG = "contrastlab_config.json"  # the run config as the trainer saves it by the model: paths on this machine


def original_names(run: Run) -> dict[str, str]:
    """The corpus file's name as the user gave it (core.data.content.given_file_name): what its exported config
    names instead of the app's copy of an upload."""
    return {"corpus": given_file_name(run.corpus_name, run.config["corpus"])} if run.config.get("corpus") else {}


def write_config(config: dict, dest: Path, json_too: bool = True) -> list[Path]:
    """config.yaml (and config.json) in `dest`: a portable run config (core.training.config.portable, its files
    named by name and content). No config.json inside a model folder: that name is the transformer's config."""
    import yaml

    dest.mkdir(parents=True, exist_ok=True)
    (dest / CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    if not json_too:
        return [dest / CONFIG_FILE]
    (dest / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return [dest / CONFIG_FILE, dest / "config.json"]


PROJECTOR_FILES = ("embeddings.tsv", "metadata.tsv")
_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def tsv_field(value: object) -> str:
    """A metadata cell the projector reads back as one cell: it splits rows at newlines and cells at tabs, and
    knows no quoting, so those (and carriage returns, and the backslash that escapes them) are written as \\n, \\t,
    \\r and \\\\."""
    return str(value).translate(_TSV_ESCAPES)


def write_projector(frame: pd.DataFrame, emb: np.ndarray, dest: Path) -> list[Path]:
    """embeddings.tsv (one row of tab-separated floats per text, no header) and metadata.tsv (a header row, then one
    row per text of frame's columns: text, label where there is one, split) for the TensorBoard embedding projector
    (projector.tensorflow.org, "Load"). With two or more columns the projector takes the first row as the header."""
    vectors, metadata = dest / PROJECTOR_FILES[0], dest / PROJECTOR_FILES[1]
    np.savetxt(vectors, emb, fmt="%.6g", delimiter="\t")
    with metadata.open("w", encoding="utf-8", newline="\n") as out:
        out.write("\t".join(map(tsv_field, frame.columns)) + "\n")
        for row in frame.itertuples(index=False):
            out.write("\t".join(map(tsv_field, row)) + "\n")
    return [vectors, metadata]


def write_embeddings(model, corpus, dest: Path, progress=None) -> list[Path]:
    """Embeddings of the texts a run is evaluated on, from the cache when possible: a labelled corpus's test split
    and train sample (with labels), a pair corpus's target pairs' texts, a list corpus's target lists' members."""
    # Both import torch; the pages import this module for safe_name, so they load only when exporting.
    from core.evaluation.corpus_eval import Scorer
    from core.models.encode import encode_cached

    parts, columns = kind_of(corpus).export_texts(corpus, Scorer())  # each part one of the evaluation's entries
    texts = [text for part in parts for text in part]
    emb = np.concatenate([encode_cached(model, part, progress=progress) for part in parts]).astype(np.float32)
    meta = pd.DataFrame({"text": texts, **columns})
    meta.assign(embedding=list(emb)).to_parquet(dest / "embeddings.parquet", index=False)
    np.save(dest / "embeddings.npy", emb)
    return [dest / "embeddings.parquet", dest / "embeddings.npy", *write_projector(meta, emb, dest)]


def export_run(store: RunStore, run_id: str, out_dir: str | Path, embeddings: bool = True, progress=None) -> dict:
    """Write everything into out_dir/<safe name>/ via a temp folder renamed at the end; returns the paths. A folder
    that cannot be written (a file, no permission, a full disk) is one UserError and leaves nothing behind."""
    if not str(out_dir).strip():  # Path("") is the current folder: an empty --out would export there unasked
        raise UserError("The output folder is empty; name a folder to export into (it is created if missing).")
    model_dir = finished_model(store, run_id)
    run = store.get(run_id)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir} is a file; name a folder to export into (it is created if missing).")
    name = export_name(run)
    final = out_dir / name
    exists = f"{final} already exists; choose another output folder or remove it."
    if final.exists():
        raise UserError(exists)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out_dir))
        try:
            shutil.copytree(model_dir, staging / "model")
            (staging / "model" / RUN_CONFIG).unlink(missing_ok=True)  # its paths stay on this machine
            shared = portable(run.config, original_names(run))  # reads the corpus's content once, for both copies
            write_config(shared, staging / "model", json_too=False)  # beside the card, which names it
            write_config(shared, staging)
            if embeddings:
                cfg = run.config
                corpus = load_any(cfg["corpus"], **corpus_options(cfg))
                write_embeddings(load_model(str(model_dir), "cpu"), corpus, staging, progress)
            shutil.make_archive(str(staging / "model"), "zip", root_dir=staging, base_dir="model")
            try:
                staging.rename(final)
            except OSError as exc:  # another export of this run into this folder finished first
                if final.exists():
                    raise UserError(exists) from exc
                raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except OSError as exc:
        raise os_error(exc, out_dir, "export into") from exc
    return {
        "dir": str(final),
        "model": str(final / "model"),
        "zip": str(final / "model.zip"),
        "files": sorted(p.name for p in final.iterdir()),
    }
