"""The Maps page's views: colour by label, split or neighbourhood change, displacement arrows (with hostile counts),
the selected-texts table, a picked text kept across a t-SNE <-> UMAP switch, and the projection's phased progress.
Unit tests of the core functions on synthetic points first, then the page through AppTest with a tiny trained run."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io
import pytest
from streamlit.testing.v1 import AppTest

import core.analysis.projection
from core.analysis import maps, projection
from core.analysis.maps import ARROWS, CHANGE, FLIP, TRAINING, MapData, map_figures, moved_most, selected_rows, selection_table
from core.analysis.plots import WEBGL_ABOVE, map_figure
from core.errors import UserError
from core.evaluation.changes import FLIPS
from tests.conftest import train_tiny_run

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 90  # the first run imports torch and sentence-transformers and encodes the demo corpus
POINTS = 250  # the smallest map size offered: t-SNE stays quick


# ---------------------------------------------------------------- core, on synthetic points


N = 60
JUMPERS = np.arange(42, N, 3)  # six texts of the first blob
STEADY = np.arange(2, N, 3)  # the third blob: no text leaves or joins it


def synthetic(seed: int = 0) -> MapData:
    """Three labelled blobs; the JUMPERS' fine-tuned embeddings jump from the first blob to the second, and on the
    fine-tuned map (else the reference map x 2) they sit with the second blob."""
    rng = np.random.default_rng(seed)
    blob = np.arange(N) % 3
    centres = np.eye(3, 4)
    ref = centres[blob] + 0.05 * rng.normal(size=(N, 4))
    tuned = ref.copy()
    tuned[JUMPERS] = centres[1] + 0.05 * rng.normal(size=(len(JUMPERS), 4))
    ref_map = np.column_stack([blob * 10.0, np.arange(N, dtype=float)]) + rng.normal(scale=0.1, size=(N, 2))
    tuned_map = 2 * ref_map
    tuned_map[JUMPERS, 0] = 2 * 10.0
    return MapData(method="tsne", texts=[f"text <b>{i}</b>" for i in range(N)],
                   labels=[("neg", "pos", "neu")[b] for b in blob], split=["train"] * (N - 10) + ["test"] * 10,
                   n_available=N, reference=ref, ref_map=ref_map, ref_knn=0.9, tuned=tuned, tuned_map=tuned_map,
                   tuned_knn=0.8, n_test=10)


def test_neighbourhood_change_is_each_points_share_of_lost_neighbours():
    data = synthetic()
    change = projection.neighbourhood_change(data.reference, data.tuned, k=5)
    one_by_one = [1 - projection.neighbour_changes(data.reference, data.tuned, i, 5)["overlap"] for i in range(N)]
    np.testing.assert_allclose(change, one_by_one)
    assert change[JUMPERS].min() >= 0.6 and not change[STEADY].any()
    assert not projection.neighbourhood_change(data.reference, data.reference).any()
    assert projection.neighbourhood_change(data.reference[:3], data.tuned[:3], k=10).shape == (3,)  # k capped
    with pytest.raises(ValueError, match="same texts"):
        projection.neighbourhood_change(data.reference, data.tuned[:5])


def test_neighbourhood_change_is_computed_once_for_the_same_embeddings(monkeypatch):
    """A t-SNE and a UMAP view of the same texts are two MapData: the second reads the first's disk cache entry."""
    calls = []
    real = projection.neighbourhood_change
    monkeypatch.setattr(projection, "neighbourhood_change", lambda *a: calls.append(1) or real(*a))
    first, again = synthetic(), replace(synthetic(), method="umap")
    np.testing.assert_array_equal(first.change, again.change)
    assert calls == [1]
    assert replace(first, tuned=first.reference).change.max() == 0 and calls == [1, 1]  # other embeddings: new


def test_fit_onto_recovers_an_affine_map():
    rng = np.random.default_rng(1)
    points = rng.normal(size=(50, 2))
    target = points @ np.array([[3.0, 0.2], [0.0, 0.5]]) + [4.0, -1.0]
    np.testing.assert_allclose(projection.fit_onto(points, target), target, atol=1e-9)
    off = target.copy()
    off[:5] += 100  # five outliers: a fit on the other rows ignores them
    np.testing.assert_allclose(projection.fit_onto(points, off, np.arange(5, 50)), target, atol=1e-9)


def test_moved_most_ranks_by_neighbourhood_change_then_map_distance():
    data = synthetic()
    rows = moved_most(data, 3)
    assert set(rows) <= set(JUMPERS) and len(rows) == 3
    assert list(rows) == sorted(rows, key=lambda i: (-data.change[i], -data.moved[i]))  # ties: farthest first
    every = moved_most(data, 500)  # more than the points: every text that changed, never an unchanged one
    assert set(every) >= set(JUMPERS) and not set(every) & set(STEADY) and len(every) == (data.change > 0).sum()
    assert len(moved_most(data, 0)) == 0
    for hostile in (2.5, -1, ARROWS.high + 1, float("nan"), "many", True, None):
        with pytest.raises(UserError, match="arrows must be a whole number"):
            moved_most(data, hostile)


def test_moved_distance_is_measured_after_fitting_the_scale():
    """The fine-tuned map here is the reference map x 2, except the jumpers: only they moved, though a plain fit on
    all points would have been pulled off by them."""
    data = synthetic()
    assert np.delete(data.moved, JUMPERS).max() < 1 < data.moved[JUMPERS].min()


def test_rows_of_finds_every_row_of_a_text():
    data = replace(synthetic(), texts=["a", "b", "a"] + [f"t{i}" for i in range(N - 3)])
    assert data.rows_of(["a", "not plotted", "t0", "a"]) == [0, 2, 3]
    assert data.rows_of([]) == [] and data.rows_of([None]) == []


def test_selected_rows_dedupes_and_skips_points_without_a_row():
    points = [{"customdata": [5, "a", ""]}, {"customdata": [2, "b", ""]}, {"customdata": [5, "a", ""]},
              {"x": 1.0, "y": 2.0}, {"customdata": None}]
    assert selected_rows(points) == [2, 5]
    assert selected_rows([]) == []


def test_selection_table_lists_text_label_split_and_change():
    data = synthetic()
    frame = selection_table(data, [2, 57])  # the most changed first
    assert list(frame.columns) == ["text", "label", "split", CHANGE]
    assert frame["text"].tolist() == ["text <b>57</b>", "text <b>2</b>"]
    assert frame["split"].tolist() == ["test", "train"]
    assert frame["label"].tolist() == ["neg", "neu"] and frame[CHANGE].tolist() == [data.change[57], 0]
    alone = replace(data, tuned=None, tuned_map=None, tuned_knn=None)
    assert list(selection_table(alone, [0]).columns) == ["text", "label", "split"]


def test_map_figures_colour_both_maps_alike_and_arrow_the_fine_tuned_one():
    data = synthetic()
    by_label = map_figures(data, "Reference", "Fine-tuned")
    assert [t.name for t in by_label[0].data] == ["neg", "neu", "pos"] == [t.name for t in by_label[1].data]
    by_split = map_figures(data, "Reference", "Fine-tuned", colour="split")
    assert [t.name for t in by_split[1].data] == ["test", "train"]
    assert by_split[0].layout.legend.title.text == "split"
    assert by_split[0].data[0].customdata[0][2] == " · neu · 0% of its 10 neighbours new"  # row 50: label in details
    ref, tuned = map_figures(data, "Reference", "Fine-tuned", colour=CHANGE, arrows=5, selected=[0, 59])
    for fig in (ref, tuned):
        assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)
        assert fig.layout.coloraxis.colorbar.title.text
    np.testing.assert_array_equal(ref.data[0].marker.color, tuned.data[0].marker.color)
    (arrows,) = [t for t in tuned.data if t.name.startswith("moved most")]
    assert arrows.name == "moved most (5)" and len(arrows.x) == 15  # start, end, gap per arrow
    assert not any(t.name.startswith("moved most") for t in ref.data)
    ends = np.column_stack([arrows.x[1::3], arrows.y[1::3]])
    np.testing.assert_allclose(ends, data.tuned_map[moved_most(data, 5)])
    np.testing.assert_allclose(np.column_stack([arrows.x[0::3], arrows.y[0::3]]),
                               data.ref_fitted[moved_most(data, 5)])
    neg, neu, pos = tuned.data[:3]
    assert list(neg.selectedpoints) == [0] and [neu.customdata[j][0] for j in neu.selectedpoints] == [59]
    assert not len(pos.selectedpoints)  # a selection elsewhere dims the whole trace
    with pytest.raises(ValueError, match="unknown colouring"):
        map_figures(data, "Reference", colour="size")
    alone = replace(data, tuned=None, tuned_map=None, tuned_knn=None)
    with pytest.raises(ValueError, match="fine-tuned model"):
        map_figures(alone, "Reference", colour=CHANGE)


def test_a_webgl_map_keeps_colour_bar_selection_and_arrows():
    n = WEBGL_ABOVE + 1
    rng = np.random.default_rng(0)
    coords, values = rng.normal(size=(n, 2)), rng.uniform(size=n)
    fig = map_figure(coords, ["a", "b"] * (n // 2) + ["a"], [str(i) for i in range(n)], "big", values=values,
                     values_title="changed", arrows=(coords[:3] + 1, [0, 1, 2]), selected=range(10))
    assert [t.type for t in fig.data] == ["scattergl", "scattergl", "scatter"]  # arrows stay SVG: they point
    assert sum(len(t.selectedpoints) for t in fig.data[:2]) == 10
    assert fig.data[2].marker.angleref == "previous"
    with pytest.raises(ValueError, match="same length"):
        map_figure(coords, ["a"] * n, ["t"] * n, "bad", values=values[:5])


def test_umap_epoch_bar_is_read_back_as_progress():
    seen = []
    relay = projection._EpochRelay(lambda done, total: seen.append((done, total)))
    relay.write("\r0/500")
    relay.write("\r125/500\r250/500")
    relay.write("\n")
    assert seen == [(0, 500), (125, 500), (250, 500)]
    assert projection.umap_epochs(10_000) == 500 and projection.umap_epochs(10_001) == 200


def test_map_phases_name_the_neighbour_step_then_count_iterations_or_epochs():
    seen = []
    for method in ("tsne", "umap"):
        report = maps._map_phase(lambda label, done, total: seen.append((label, done, total)), method, "reference map")
        report(0, 500)
        report(100, 500)
    assert seen == [("t-SNE · reference map: finding neighbours before the iterations", 0, 500),
                    ("t-SNE · reference map (iterations)", 100, 500),
                    ("UMAP · reference map: building the neighbour graph before the epochs", 0, 500),
                    ("UMAP · reference map (epochs)", 100, 500)]
    assert maps._map_phase(None, "tsne", "reference map") is None


# ---------------------------------------------------------------- the page, with a tiny trained run


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("maps_views_home")


@pytest.fixture(scope="module")
def trained(home, tiny_model_dir) -> str:
    return train_tiny_run(home, tiny_model_dir)


@pytest.fixture
def fake_umap(monkeypatch):
    """UMAP's numba compilation takes ~20 s; the page only dispatches, so a seeded stand-in draws its maps."""
    def umap_2d(emb, init=None, seed=0, progress=None):
        if progress:
            progress(0, 10)
            progress(10, 10)
        return np.random.default_rng(seed).normal(size=(len(emb), 2)) if init is None else init + 0.1

    monkeypatch.setattr(core.analysis.projection, "umap_2d", umap_2d)


def open_maps(monkeypatch, home, tiny_model_dir, **state) -> AppTest:
    """The Maps page at POINTS texts, with `state` in the session before it first shows."""
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("CONTRASTLAB_HOME", str(home))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT_S).run()
    at.switch_page("app_pages/3_Maps.py")
    for key, value in {"maps_points": POINTS, **state}.items():
        at.session_state[key] = value
    at.run()
    no_errors(at)
    return at


def no_errors(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def figures(at: AppTest) -> list[go.Figure]:
    """The page's plotly charts as figures (their JSON holds arrays as base64 blobs)."""
    return [plotly.io.from_json(chart.proto.spec) for chart in at.get("plotly_chart")]


def decoded(value) -> np.ndarray:
    """A figure's array: plotly writes numpy arrays as {"dtype", "bdata"} (base64) in its JSON."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value)


def arrow_traces(fig: go.Figure) -> list:
    return [t for t in fig.data if (t.name or "").startswith("moved most")]


def shown_data(at: AppTest) -> MapData:
    """The map data the page draws (its session cache holds the latest only)."""
    (data,) = at.session_state["session_caches"]["maps"].values()
    return data


def test_without_a_run_colour_by_label_or_split_only(monkeypatch, home, tiny_model_dir):
    """First in the module: the shared home has no finished run yet."""
    at = open_maps(monkeypatch, home, tiny_model_dir, maps_colour=CHANGE)  # kept from a corpus that had a run
    colour = at.radio(key="maps_colour")
    assert colour.options == ["label", "split"] and colour.value == "label" and not at.toggle
    assert len(figures(at)) == 1


def test_colour_modes_colour_both_maps_alike(monkeypatch, home, tiny_model_dir, trained):
    at = open_maps(monkeypatch, home, tiny_model_dir)
    colour = at.radio(key="maps_colour")
    assert colour.options == ["label", "split", CHANGE, FLIP] and colour.value == "label"
    ref, tuned = figures(at)
    assert [t.name for t in ref.data] == [t.name for t in tuned.data] == sorted(set(shown_data(at).labels))

    colour.set_value("split").run()
    no_errors(at)
    ref, tuned = figures(at)
    assert {t.name for t in ref.data} == set(shown_data(at).split) == {"train", "holdout"}  # the demo's target split
    assert ref.layout.legend.title.text == "split"
    assert [t.marker.color for t in ref.data] == [t.marker.color for t in tuned.data]

    at.radio(key="maps_colour").set_value(CHANGE).run()
    no_errors(at)
    ref, tuned = figures(at)
    for fig in (ref, tuned):
        assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)
        assert sum(len(t.customdata) for t in fig.data) == POINTS
    values = np.concatenate([decoded(t.marker.color) for t in ref.data])
    np.testing.assert_array_equal(values, np.concatenate([decoded(t.marker.color) for t in tuned.data]))
    assert 0 <= values.min() and values.max() <= 1 and values.max() > 0  # training changed some neighbourhoods

    at.radio(key="maps_colour").set_value(FLIP).run()
    no_errors(at)
    ref, tuned = figures(at)
    assert ref.layout.legend.title.text.startswith("kNN vote")
    assert (ref.layout.legend.orientation, tuned.layout.legend.orientation) == ("h", "h")  # below: maps take the width
    assert {t.name for t in ref.data} == {t.name for t in tuned.data} <= {*FLIPS, TRAINING}
    assert TRAINING in {t.name for t in ref.data} and sum(len(t.customdata) for t in ref.data) == POINTS
    # issue 31, item 3.8: the counts beside the colouring, one per outcome, adding up to the test texts plotted
    (line,) = [c.value for c in at.caption if c.value.startswith("Of the ")]
    voted = sum(len(t.customdata) for t in ref.data if t.name != TRAINING)
    assert line.startswith(f"Of the {voted:,} test texts plotted: ") and all(f in line for f in FLIPS)
    counts = {t.name: len(t.customdata) for t in ref.data}
    assert all(f"{counts.get(f, 0):,} {f}" in line for f in FLIPS)


def test_arrows_count_and_hostile_counts(monkeypatch, home, tiny_model_dir, trained):
    at = open_maps(monkeypatch, home, tiny_model_dir)
    assert not any(arrow_traces(fig) for fig in figures(at))  # off by default
    at.toggle(key="maps_arrows_on").set_value(True).run()
    no_errors(at)
    ref, tuned = figures(at)
    (arrows,) = arrow_traces(tuned)
    changed = int((shown_data(at).change > 0).sum())  # a tiny run moves few texts: arrows only for those
    assert changed >= 3
    shown = min(ARROWS.default, changed)
    assert arrows.name == f"moved most ({shown})" and len(decoded(arrows.x)) == 3 * shown
    assert not arrow_traces(ref)
    assert f"{shown} texts whose neighbourhood changed" in " ".join(c.value for c in at.caption)

    at.number_input(key="maps_arrows").set_value(0).run()
    no_errors(at)
    assert not arrow_traces(figures(at)[1])
    at.number_input(key="maps_arrows").set_value(3).run()
    assert arrow_traces(figures(at)[1])[0].name == "moved most (3)"
    at.number_input(key="maps_arrows").set_value(int(ARROWS.high)).run()  # more than the points
    no_errors(at)
    (arrows,) = arrow_traces(figures(at)[1])
    assert len(decoded(arrows.x)) // 3 == changed
    assert any(f"more than the {POINTS} texts plotted" in c.value for c in at.caption)
    # Streamlit's number input keeps values whole and in [0, 500] (as its arrows do in the browser): a fraction is
    # cut to a whole number, a value out of range is refused; either way no traceback and a count it can draw.
    for hostile, drawn in ((2.5, 2), (10**6, ARROWS.default), (-1, ARROWS.default)):
        at.number_input(key="maps_arrows").set_value(hostile).run()
        no_errors(at)
        assert at.number_input(key="maps_arrows").value == drawn
        assert arrow_traces(figures(at)[1])[0].name == f"moved most ({min(drawn, changed)})"


def test_picked_text_survives_a_projection_switch(monkeypatch, home, tiny_model_dir, trained, fake_umap):
    at = open_maps(monkeypatch, home, tiny_model_dir)
    picker = next(s for s in at.selectbox if s.label.startswith("Click a point"))
    picker.set_value(7).run()
    no_errors(at)
    text = at.session_state["maps_picked"]
    ring = next(t for t in figures(at)[0].data if t.name == "picked")
    assert ring.customdata[0][0] == 7 and at.text[0].value == text

    at.radio(key="maps_method").set_value("UMAP").run()
    no_errors(at)
    assert figures(at)[0].layout.xaxis.title.text == "UMAP 1"
    picker = next(s for s in at.selectbox if s.label.startswith("Click a point"))
    assert picker.value is not None and at.text[0].value == text  # the same text, picked on the UMAP maps
    assert any(t.name == "picked" for t in figures(at)[1].data)
    at.radio(key="maps_method").set_value("t-SNE").run()
    assert at.session_state["maps_picked"] == text and at.text[0].value == text


def test_selected_texts_table_and_clearing_it(monkeypatch, home, tiny_model_dir, trained):
    at = open_maps(monkeypatch, home, tiny_model_dir)
    assert not [h for h in at.subheader if h.value.startswith("Selected texts")]
    chosen = list(dict.fromkeys(shown_data(at).texts))[:3]  # three different texts
    at.session_state["maps_selected"] = chosen + ["a text that is not plotted"]
    at.run()
    no_errors(at)
    assert [h.value for h in at.subheader if h.value.startswith("Selected texts")] == ["Selected texts · 3"]
    table = next(df.value for df in at.dataframe if "text" in df.value.columns)
    assert list(table.columns) == ["text", "label", "split", CHANGE] and table["text"].tolist() == chosen
    for fig in figures(at):  # both maps show the selection, the rest dimmed
        assert sum(len(t.selectedpoints or ()) for t in fig.data) == 3
    at.radio(key="maps_colour").set_value("split").run()  # a rerun that redraws the maps keeps the selection
    assert [h.value for h in at.subheader if h.value.startswith("Selected texts")] == ["Selected texts · 3"]
    next(b for b in at.button if b.label == "Clear the selection").click().run()
    no_errors(at)
    assert not [h for h in at.subheader if h.value.startswith("Selected texts")]
