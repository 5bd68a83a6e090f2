"""The Maps page's data: reference vs fine-tuned embeddings of a corpus drawn as aligned 2-D maps
(docs/definitions.md, Aligned maps), their kNN accuracy, the map figures and the neighbours of a selected point.

Everything heavy goes through the disk caches (core.models.encode.encode_cached,
core.analysis.projection.cached_projection), so a page that only re-plots never re-encodes or re-projects.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.analysis import projection
from core.analysis.plots import map_figure, map_png, plot_text
from core.data.corpus import Corpus
from core.errors import UserError, os_error
from core.evaluation.evaluate import EvalSettings, PhaseProgress, eval_sets
from core.evaluation.metrics import knn_accuracy
from core.models.encode import encode_cached
from core.models.loading import model_fingerprint
from core.storage import write_atomic
from core.training.params import Param

METHOD_NAMES = {"tsne": "t-SNE", "umap": "UMAP"}
SETTINGS = EvalSettings()  # kNN k = 10, Euclidean: the same numbers as the Corpus and Runs pages
NEIGHBOURS = 10
POINT_STEPS = (250, 500, 1000, 2000, 5000, 10000, 20000, 50000)  # the sizes the Maps page offers
MAX_POINTS = Param("max_points", int, 2000, "Texts to plot", "at most this many texts, stratified by split and label",
                   low=projection.MIN_POINTS, high=1_000_000)


@dataclass(frozen=True)
class MapData:
    """The plotted points (a stratified subsample of the encoded ones) with both models' embeddings and
    maps; `tuned*` are None when there is no fine-tuned model to compare yet."""

    method: str
    texts: list[str]
    labels: list[str]
    split: list[str]
    n_available: int  # encoded texts the plotted ones were drawn from
    reference: np.ndarray  # (n, d) embeddings of the plotted texts
    ref_map: np.ndarray  # (n, 2)
    ref_knn: float
    tuned: np.ndarray | None = None
    tuned_map: np.ndarray | None = None
    tuned_knn: float | None = None
    n_test: int = 0  # test texts the kNN accuracy was measured on
    ref_seconds: float = 0.0  # spent computing each map (about 0 when it came from the disk cache)
    tuned_seconds: float | None = None

    def __len__(self) -> int:
        return len(self.texts)


def available_points(corpus: Corpus) -> int:
    """How many texts a map can draw from: the evaluation's training rows plus the whole test split."""
    return len(eval_sets(corpus, SETTINGS).train_rows) + len(corpus.test_texts)


def point_options(total: int) -> list[int]:
    """The map sizes to offer for `total` available texts: the round sizes below it, then all of them while that is
    within the largest size."""
    return [n for n in POINT_STEPS if n < total] + ([total] if total <= POINT_STEPS[-1] else [])


def _phase(progress: PhaseProgress | None, label: str) -> Callable[[int, int], None] | None:
    return (lambda done, total: progress(label, done, total)) if progress else None


def _encode(model, corpus: Corpus, train_texts: list[str], name: str,
            progress: PhaseProgress | None) -> tuple[np.ndarray, np.ndarray]:
    """Train-sample and test embeddings under the same cache keys as core.evaluation.evaluate, so a model the Corpus
    page or a training run already evaluated is not encoded again."""
    fp = model_fingerprint(model)
    train = encode_cached(model, train_texts, fingerprint=fp,
                          progress=_phase(progress, f"{name}: encoding train sample"))
    test = encode_cached(model, corpus.test_texts, fingerprint=fp,
                         progress=_phase(progress, f"{name}: encoding {corpus.target_split}"))
    return train, test


def _reference_map(emb: np.ndarray, method: str, seed: int,
                   progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """The reference map alone, cached under the key aligned_maps gives it (same method, content, seed,
    no params, no init), so the first run trained later starts from this very map without recomputing it."""
    def project() -> np.ndarray:
        if method == "tsne":
            return projection.tsne(emb, seed=seed, progress=progress)
        return projection.umap_2d(emb, seed=seed)

    return projection.cached_projection(projection.reference_map_key(method, emb, seed, {}), project,
                                        rows=len(emb))


def map_data(reference, tuned, corpus: Corpus, method: str = "tsne", max_points: int = 2000, seed: int = 0,
             progress: PhaseProgress | None = None) -> MapData:
    """Embeddings, aligned 2-D maps (the fine-tuned one started from the reference one) and kNN
    accuracy of both models; `tuned` None gives the reference map alone.

    Points are drawn from the evaluation's train rows and the test split, subsampled to `max_points`
    stratified by split and label. kNN accuracy (k = 10) classifies every test text by its nearest
    evaluation train texts, not only the plotted ones, so it matches the Corpus and Runs pages.
    """
    if method not in METHOD_NAMES:
        raise ValueError(f"unknown projection method {method!r}; choose one of {tuple(METHOD_NAMES)}")
    sets = eval_sets(corpus, SETTINGS)
    train_texts = sets.train_texts
    texts = train_texts + list(corpus.test_texts)
    codes = np.concatenate([sets.train_labels, corpus.test_labels])
    split = ["train"] * len(train_texts) + [corpus.target_split] * len(corpus.test_texts)
    strata = [f"{s}\x1f{c}" for s, c in zip(split, codes)]
    rows = projection.subsample(len(texts), max_points, strata, seed)

    def embed_and_score(model, name: str) -> tuple[np.ndarray, float]:
        train, test = _encode(model, corpus, train_texts, name, progress)
        acc = knn_accuracy(train[sets.knn_pos], corpus.train_labels[sets.knn], test, corpus.test_labels,
                           SETTINGS.knn_k, SETTINGS.knn_metric)
        return np.concatenate([train, test])[rows], acc

    ref_emb, ref_knn = embed_and_score(reference, "reference")
    tuned_emb, tuned_knn = embed_and_score(tuned, "fine-tuned") if tuned is not None else (None, None)
    label = METHOD_NAMES[method]
    common = {"method": method, "texts": [texts[i] for i in rows],
              "labels": [corpus.classes[codes[i]] for i in rows], "split": [split[i] for i in rows],
              "n_available": len(texts), "reference": ref_emb, "ref_knn": ref_knn,
              "n_test": len(corpus.test_texts)}
    if progress:
        progress(f"Projecting with {label} (maps)", 0, 1 if tuned is None else 2)
    started = time.perf_counter()
    ref_map = _reference_map(ref_emb, method, seed, _phase(progress, f"{label}: reference map (iterations)"))
    common["ref_seconds"] = time.perf_counter() - started
    if tuned is None:
        return MapData(ref_map=ref_map, **common)
    started = time.perf_counter()  # the reference map comes from the cache _reference_map just filled
    _, tuned_map = projection.aligned_maps(
        ref_emb, tuned_emb, method, seed,
        progress=(None, _phase(progress, f"{label}: fine-tuned map from the reference layout (iterations)")))
    return MapData(ref_map=ref_map, tuned=tuned_emb, tuned_map=tuned_map, tuned_knn=tuned_knn,
                   tuned_seconds=time.perf_counter() - started, **common)


def map_title(name: str, accuracy: float, data: MapData) -> str:
    return (f"{plot_text(name)} · kNN accuracy {accuracy:.1%} "
            f"<sup>(all {data.n_test:,} test texts, k={SETTINGS.knn_k})</sup>")


def map_figures(data: MapData, reference_name: str, tuned_name: str | None = None,
                highlight: int | None = None) -> tuple[go.Figure, go.Figure | None]:
    """(reference figure, fine-tuned figure or None): same label colours, kNN accuracy in each title."""
    method = METHOD_NAMES[data.method]
    ref = map_figure(data.ref_map, data.labels, data.texts, map_title(reference_name, data.ref_knn, data),
                     highlight, method)
    if data.tuned_map is None:
        return ref, None
    tuned = map_figure(data.tuned_map, data.labels, data.texts,
                       map_title(tuned_name or "fine-tuned", data.tuned_knn, data), highlight, method)
    return ref, tuned


def output_dir(path: str | Path) -> Path:
    """The folder maps are written into, created if missing; a path that cannot be one is a UserError at once, before
    any model is loaded."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file; name a folder to write the maps into (it is created if missing).")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):  # a folder that exists but takes no files (permissions, read-only)
            pass
    except OSError as exc:
        raise os_error(exc, out, "write the maps into") from exc
    return out


def write_maps(data: MapData, out: Path, reference_name: str = "Reference",
               tuned_name: str = "Fine-tuned") -> list[Path]:
    """Each map as reference.* (and tuned.* with a fine-tuned model) in `out`: .html, the interactive figure the page
    draws (plotly.js inline, so it opens offline); .png, a static picture of the same points and colours; .parquet,
    one row per text with its label, split and map coordinates (x, y). Each file is written whole or not at all."""
    method = METHOD_NAMES[data.method]
    maps = [("reference", reference_name, data.ref_map, data.ref_knn)]
    if data.tuned_map is not None:
        maps.append(("tuned", tuned_name, data.tuned_map, data.tuned_knn))
    written = []
    try:
        for stem, name, coords, accuracy in maps:
            fig = map_figure(coords, data.labels, data.texts, map_title(name, accuracy, data), method=method)
            frame = pd.DataFrame({"text": data.texts, "label": data.labels, "split": data.split,
                                  "x": coords[:, 0], "y": coords[:, 1]})
            title = f"{name} · kNN accuracy {accuracy:.1%} (all {data.n_test:,} test texts, k={SETTINGS.knn_k})"
            for suffix, write in (
                    (".html", lambda tmp: fig.write_html(tmp, include_plotlyjs=True)),
                    (".png", lambda tmp: map_png(coords, data.labels, title, tmp, method)),
                    (".parquet", lambda tmp: frame.to_parquet(tmp, index=False))):
                write_atomic(out / f"{stem}{suffix}", write)
                written.append(out / f"{stem}{suffix}")
    except OSError as exc:
        raise os_error(exc, out, "write the maps into") from exc
    return written


class Neighbours(NamedTuple):
    reference: pd.DataFrame
    tuned: pd.DataFrame
    overlap: float  # share of the reference neighbours the fine-tuned model kept


def neighbours(data: MapData, index: int, k: int = NEIGHBOURS) -> Neighbours:
    """The k cosine neighbours of one plotted point under each model, among the plotted points, marked
    kept (under both), lost (reference only) or new (fine-tuned only)."""
    if data.tuned is None:
        raise ValueError("neighbour changes need a fine-tuned model")
    changes = projection.neighbour_changes(data.reference, data.tuned, index, k)
    kept = set(changes["kept"])

    def frame(idx: list[int], scores: list[float], other: str) -> pd.DataFrame:
        return pd.DataFrame({
            "status": ["kept" if i in kept else other for i in idx],
            "cosine": np.round(scores, 3),
            "label": [data.labels[i] for i in idx],
            "split": [data.split[i] for i in idx],
            "text": [data.texts[i] for i in idx],
        })

    return Neighbours(frame(changes["ref"], changes["ref_scores"], "lost"),
                      frame(changes["tuned"], changes["tuned_scores"], "new"), changes["overlap"])
