"""The Maps page's data: reference vs fine-tuned embeddings of a corpus drawn as aligned 2-D maps
(docs/definitions.md, Aligned maps), their kNN accuracy, the map figures (coloured by label, split or neighbourhood
change, with arrows for the texts that moved most), the neighbours of a picked point and a table of selected ones.

Everything heavy goes through the disk caches (core.models.encode.encode_cached,
core.analysis.projection.cached_projection), so a page that only re-plots never re-encodes or re-projects.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
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
from core.evaluation.changes import BETTER, FLIPS, KEPT_RIGHT, KEPT_WRONG, WORSE, flip_status
from core.evaluation.metrics import knn_predict
from core.evaluation.uncertainty import proportion_ci
from core.models.encode import encode_cached
from core.models.loading import model_fingerprint
from core.storage import cached_array, projection_entry, write_atomic
from core.training.params import Param

METHOD_NAMES = {"tsne": "t-SNE", "umap": "UMAP"}
SETTINGS = EvalSettings()  # kNN k = 10, Euclidean: the same numbers as the Corpus and Runs pages
NEIGHBOURS = 10
POINT_STEPS = (250, 500, 1000, 2000, 5000, 10000, 20000, 50000)  # the sizes the Maps page offers
MAX_POINTS = Param("max_points", int, 2000, "Texts to plot", "at most this many texts, stratified by split and label",
                   low=projection.MIN_POINTS, high=1_000_000)
CHANGE = "neighbourhood change"
FLIP = "kNN flip"  # a test text's kNN vote before -> after (core.evaluation.changes.FLIPS); training texts apart
COLOURS = ("label", "split", CHANGE, FLIP)  # what points can be coloured by; CHANGE and FLIP need a fine-tuned model
TRAINING = "training text (not voted on)"
# A flip's colour says what it means (red worse, green better), and the training texts stay grey underneath.
FLIP_COLOURS = {TRAINING: "#ced4da", KEPT_RIGHT: "#74c0fc", KEPT_WRONG: "#ffa94d", BETTER: "#2b8a3e", WORSE: "#c92a2a"}
ARROWS = Param("arrows", int, 20, "Arrows",
               "how many texts get an arrow: those whose neighbourhood changed most", low=0, high=500)
# What a map's first step does before it reports iterations (t-SNE) or epochs (UMAP), and what those are called.
STEPS = {"tsne": ("finding neighbours", "iterations"), "umap": ("building the neighbour graph", "epochs")}


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
    ref_right: np.ndarray | None = None  # per plotted text: its kNN vote right (test texts); None for training texts
    tuned_right: np.ndarray | None = None
    tuned: np.ndarray | None = None
    tuned_map: np.ndarray | None = None
    tuned_knn: float | None = None
    n_test: int = 0  # test texts the kNN accuracy was measured on
    ref_seconds: float = 0.0  # spent computing each map (about 0 when it came from the disk cache)
    tuned_seconds: float | None = None

    def __len__(self) -> int:
        return len(self.texts)

    @cached_property
    def change(self) -> np.ndarray | None:
        """Per text, the share of its NEIGHBOURS nearest texts under the reference model that are not among them under
        the fine-tuned one (cosine, among the plotted texts, on the embeddings). Cached on disk by the embeddings'
        content, as the maps are: the exact search takes a minute at 50,000 texts, and a t-SNE and a UMAP view of
        the same texts share it."""
        if self.tuned is None:
            return None
        return cached_array(projection_entry(("neighbourhood change", self.reference, self.tuned, NEIGHBOURS)),
                            lambda: projection.neighbourhood_change(self.reference, self.tuned, NEIGHBOURS),
                            (len(self),))

    @property
    def flips(self) -> list[str] | None:
        """Per plotted text, its kNN vote before -> after training (core.evaluation.changes.FLIPS: right -> wrong
        first), or TRAINING for the training texts the vote reads; None without a fine-tuned model."""
        if self.tuned_right is None or self.ref_right is None:
            return None
        voted = np.array([r is not None for r in self.ref_right])
        status = flip_status(self.ref_right == True, self.tuned_right == True)  # noqa: E712 (object arrays)
        return np.where(voted, status, TRAINING).tolist()

    def flips_text(self) -> str:
        """How many plotted test texts went each way, for a line beside the kNN-flip colouring: "Of the 83 test
        texts plotted: 5 right → wrong, 9 wrong → right, 61 right both, 8 wrong both"; "" without a fine-tuned
        model."""
        flips = self.flips
        if flips is None:
            return ""
        counts = Counter(flips)
        voted = sum(counts[f] for f in FLIPS)
        return (f"Of the {voted:,} test text{'s' if voted != 1 else ''} plotted: "
                + ", ".join(f"{counts[f]:,} {f}" for f in FLIPS))

    @cached_property
    def moved(self) -> np.ndarray | None:
        """Per text, how far it lies from its reference-map position on the fine-tuned map, the reference map fitted
        onto the fine-tuned one first (projection.fit_onto): the arrows' start points are those fitted positions."""
        return None if self.tuned_map is None else np.linalg.norm(self.tuned_map - self.ref_fitted, axis=1)

    @cached_property
    def ref_fitted(self) -> np.ndarray:
        """The reference map carried into the fine-tuned map's frame, fitted on the half of the texts whose
        neighbourhood changed least: those should stay put, while the texts that moved would pull a fit on all."""
        return projection.fit_onto(self.ref_map, self.tuned_map, self.change <= np.median(self.change))

    @cached_property
    def _rows(self) -> dict[str, list[int]]:
        rows: dict[str, list[int]] = {}
        for i, text in enumerate(self.texts):
            rows.setdefault(text, []).append(i)
        return rows

    def rows_of(self, texts: Iterable[str]) -> list[int]:
        """The rows holding any of `texts` (each row of a duplicated text), ascending; texts not plotted have none.
        A page keeps a pick or a selection as texts: a text outlives the subsample whose rows index it."""
        return sorted(i for text in set(texts) for i in self._rows.get(text, []))


def available_points(corpus: Corpus) -> int:
    """How many texts a map can draw from: the evaluation's training rows plus the whole test split."""
    return len(eval_sets(corpus, SETTINGS).train_rows) + len(corpus.test_texts)


def point_options(total: int) -> list[int]:
    """The map sizes to offer for `total` available texts: the round sizes below it, then all of them while that is
    within the largest size."""
    return [n for n in POINT_STEPS if n < total] + ([total] if total <= POINT_STEPS[-1] else [])


def _phase(progress: PhaseProgress | None, label: str) -> Callable[[int, int], None] | None:
    return (lambda done, total: progress(label, done, total)) if progress else None


def _map_phase(progress: PhaseProgress | None, method: str, which: str) -> projection.Progress | None:
    """One map's progress as two phases: its neighbour search (reported only as its (0, total) start, so it is named
    while it runs), then its iterations (t-SNE) or epochs (UMAP) as they go."""
    if progress is None:
        return None
    first, unit = STEPS[method]
    name = f"{METHOD_NAMES[method]} · {which}"
    return lambda done, total: progress(f"{name}: {first} before the {unit}" if done == 0 else f"{name} ({unit})",
                                        done, total)


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
                   progress: projection.Progress | None = None) -> np.ndarray:
    """The reference map alone, cached under the key aligned_maps gives it (same method, content, seed,
    no params, no init), so the first run trained later starts from this very map without recomputing it."""
    return projection.cached_projection(projection.reference_map_key(method, emb, seed, {}),
                                        lambda: projection.project(method, emb, None, seed, {}, progress),
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

    def embed_and_score(model, name: str) -> tuple[np.ndarray, float, np.ndarray]:
        train, test = _encode(model, corpus, train_texts, name, progress)
        right = knn_predict(train[sets.knn_pos], corpus.train_labels[sets.knn], test, SETTINGS.knn_k,
                            SETTINGS.knn_metric) == corpus.test_labels
        voted = np.concatenate([np.full(len(train_texts), None, dtype=object), right.astype(object)])[rows]
        return np.concatenate([train, test])[rows], float(right.mean()), voted

    ref_emb, ref_knn, ref_right = embed_and_score(reference, "reference")
    tuned_emb, tuned_knn, tuned_right = (embed_and_score(tuned, "fine-tuned") if tuned is not None
                                         else (None, None, None))
    common = {"method": method, "texts": [texts[i] for i in rows],
              "labels": [corpus.classes[codes[i]] for i in rows], "split": [split[i] for i in rows],
              "n_available": len(texts), "reference": ref_emb, "ref_knn": ref_knn, "ref_right": ref_right,
              "n_test": len(corpus.test_texts)}
    started = time.perf_counter()
    which = "reference map" if tuned is None else "1 of 2, reference map"
    ref_map = _reference_map(ref_emb, method, seed, _map_phase(progress, method, which))
    common["ref_seconds"] = time.perf_counter() - started
    if tuned is None:
        return MapData(ref_map=ref_map, **common)
    started = time.perf_counter()  # the reference map comes from the cache _reference_map just filled
    _, tuned_map = projection.aligned_maps(
        ref_emb, tuned_emb, method, seed,
        progress=(None, _map_phase(progress, method, "2 of 2, fine-tuned map from the reference layout")))
    return MapData(ref_map=ref_map, tuned=tuned_emb, tuned_map=tuned_map, tuned_knn=tuned_knn, tuned_right=tuned_right,
                   tuned_seconds=time.perf_counter() - started, **common)


def map_title(name: str, accuracy: float, data: MapData) -> str:
    """The figure and, on a line of its own, what it rests on: beside it, the note ran past a half-page map's edge."""
    return f"{plot_text(name)} · kNN accuracy {accuracy:.1%}<br><sup>{_accuracy_note(accuracy, data)}</sup>"


def _accuracy_note(accuracy: float, data: MapData) -> str:
    """What a map's kNN accuracy rests on: its 95% interval (Wilson) over all the test texts, and k."""
    low, high = proportion_ci(accuracy, data.n_test)
    ci = f"95% CI {low:.1%}–{high:.1%}, " if data.n_test else ""
    return f"{ci}all {data.n_test:,} test texts, k={SETTINGS.knn_k}"


def _change_text(change: float) -> str:
    return f"{change:.0%} of its {NEIGHBOURS} neighbours new"


def map_figures(data: MapData, reference_name: str, tuned_name: str | None = None, highlight: int | None = None,
                colour: str = "label", arrows: int = 0,
                selected: Collection[int] | None = None) -> tuple[go.Figure, go.Figure | None]:
    """(reference figure, fine-tuned figure or None), both coloured by `colour` (one of COLOURS) alike, kNN accuracy
    in each title; the fine-tuned one with arrows for the `arrows` texts that moved most (moved_most). `selected`
    rows show as selected on both; a drag selects a box (the toolbar offers lasso, zoom and pan)."""
    if colour not in COLOURS:
        raise ValueError(f"unknown colouring {colour!r}; choose one of {COLOURS}")
    if data.tuned is None and (colour in (CHANGE, FLIP) or arrows):
        raise ValueError("neighbourhood change, kNN flips and arrows need a fine-tuned model")
    change = data.change
    details = [(label if colour == "split" else split) + ("" if change is None else f" · {_change_text(change[i])}")
               for i, (label, split) in enumerate(zip(data.labels, data.split))]
    style = {"method": METHOD_NAMES[data.method], "details": details, "selected": selected,
             **({"colour_by": data.split, "colour_title": "split"} if colour == "split" else {}),
             **({"colour_by": data.flips, "colour_title": "kNN vote, before → after", "colours": FLIP_COLOURS}
                if colour == FLIP else {}),
             **({"values": change, "values_title": f"{NEIGHBOURS} nearest<br>neighbours new"} if colour == CHANGE
                else {})}
    ref = map_figure(data.ref_map, data.labels, data.texts, map_title(reference_name, data.ref_knn, data),
                     highlight, **style).update_layout(dragmode="select")
    if data.tuned_map is None:
        return ref, None
    rows = moved_most(data, arrows)
    tuned = map_figure(data.tuned_map, data.labels, data.texts,
                       map_title(tuned_name or "fine-tuned", data.tuned_knn, data), highlight,
                       arrows=(data.ref_fitted[rows], rows) if len(rows) else None, **style)
    return ref, tuned.update_layout(dragmode="select")


def moved_most(data: MapData, n: int) -> np.ndarray:
    """Rows of the (at most) n texts whose neighbourhood changed most, ties broken by how far they moved on the map
    (MapData.moved); a text whose neighbourhood did not change is never among them. Neighbourhood change ranks
    because it is measured on the embeddings: a map can shift a text whose neighbours stayed the same (t-SNE's
    distances between clusters mean little), while a lost neighbourhood is a change in the model itself."""
    n = ARROWS.parse(n)
    if data.change is None:
        raise ValueError("arrows need a fine-tuned model")
    order = np.lexsort((-data.moved, -data.change))  # the last key sorts first
    return order[data.change[order] > 0][:n]


def selected_rows(points: Sequence[dict]) -> list[int]:
    """The plotted rows among a chart selection's points (Streamlit's plotly selection state), each once: a point
    carries its row as customdata[0]; an arrow's points carry none."""
    return sorted({int(p["customdata"][0]) for p in points if p.get("customdata")})


def selection_table(data: MapData, rows: Sequence[int]) -> pd.DataFrame:
    """The selected texts with their label, split and, with a fine-tuned model, neighbourhood change (a share), the
    most changed first: what a selection around a moved cluster is usually after."""
    rows = list(rows)
    frame = pd.DataFrame({"text": [data.texts[i] for i in rows], "label": [data.labels[i] for i in rows],
                          "split": [data.split[i] for i in rows]})
    if data.change is None:
        return frame
    frame[CHANGE] = data.change[rows]
    return frame.sort_values(CHANGE, ascending=False, kind="stable", ignore_index=True)


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
            title = f"{name} · kNN accuracy {accuracy:.1%} ({_accuracy_note(accuracy, data)})"
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
