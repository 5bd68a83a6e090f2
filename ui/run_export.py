"""Exporting a finished run from a page (core.runs.export does the work) and downloading the exported files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from core.runs.export import export_name, export_run
from core.runs.store import Run, RunStore
from core.storage import exports_dir
from ui.feedback import progress_bar

EXPORT_FILES = (  # file in an export folder, download label, MIME type
    ("model.zip", "Model (zip)", "application/zip"),
    ("embeddings.parquet", "Embeddings (Parquet)", "application/octet-stream"),
    ("config.yaml", "Config (YAML)", "application/x-yaml"),
    ("embeddings.tsv", "Projector vectors (TSV)", "text/tab-separated-values"),  # TensorBoard projector's pair
    ("metadata.tsv", "Projector metadata (TSV)", "text/tab-separated-values"),
)


def find_export(run: Run) -> Path | None:
    """The run's complete export folder, if it was exported before (export_run renames it into place last)."""
    folder = exports_dir() / export_name(run)
    return folder if (folder / "model.zip").exists() else None


def export(runs: RunStore, run: Run) -> Path:
    """Export a done run into CONTRASTLAB_HOME/exports with a progress bar, or reuse an earlier export."""
    found = find_export(run)
    if found is not None:
        return found
    with progress_bar("Exporting…") as bar:
        result = export_run(runs, run.id, exports_dir(), progress=lambda d, t: bar("Encoding embeddings", d, t))
    return Path(result["dir"])


def _reader(path: Path) -> Callable[[], bytes]:
    return lambda: path.read_bytes()


def download_buttons(folder: Path, key: str) -> None:
    """Download buttons for the model zip, the embeddings, the config and the projector's TSV pair of an export
    folder (those it holds: an export made before the TSV pair existed lacks it); files are read only when clicked
    (a model zip is large)."""
    present = [(name, label, mime) for name, label, mime in EXPORT_FILES if (folder / name).exists()]
    for col, (name, label, mime) in zip(st.columns(3) * 2, present):  # two rows of three: labels stay on one line
        col.download_button(label, data=_reader(folder / name), file_name=f"{folder.name}-{name}", mime=mime,
                            key=f"{key}:{name}", on_click="ignore", icon=":material/download:")
    st.caption(f"Exported to `{folder}`")
