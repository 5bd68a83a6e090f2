"""The pages of issue 11 through AppTest on the tiny model and the demo corpus: the mgh recipe's widgets and its
banded preview on the Train page, a bad band edges value as one error line, an mgh run's loss curve with its band
boundaries, and the Layers page's CKA figure ("which layers changed"); plus the figure builders behind them.

Band edges 1,2,3,4 keep the bands fillable and the mining quick on the demo corpus (829 rows, 4 classes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import core.jobs.launch
import core.jobs.worker
import core.models.encode
from core.analysis.layers import cka_layers_figure
from core.analysis.plots import cka_figure, loss_curve_figure
from core.runs.store import Run, RunStore
from core.training.mgh import ORDERS, band_phases
from core.training.recipes import RECIPES
from tests.conftest import APP, APP_TIMEOUT_S, button, no_errors, train_tiny_run

SMALL_BANDS = "1,2,3,4"
TINY_MGH = {"train:examples": 64, "train:batch:sup": 16}  # four steps: one per band of a scheduled order


def open_page(at: AppTest, page: str) -> AppTest:
    at.run()
    return at.switch_page(page).run()


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def pick_mgh(at: AppTest, bands: str = SMALL_BANDS) -> AppTest:
    at.selectbox(key="train:recipe:Supervised").set_value("mgh").run()
    return at.text_input(key="train:bands").set_value(bands).run()


def phase_lines(fig: dict) -> list[tuple[float, str]]:
    """(x, label) of the loss curve's dotted phase lines, in drawing order."""
    lines = [s["x0"] for s in fig["layout"].get("shapes", []) if s.get("line", {}).get("dash") == "dot"]
    labels = [a["text"] for a in fig["layout"].get("annotations", []) if a.get("yref") == "y domain"]
    return list(zip(lines, labels, strict=True))


# --- figure builders -------------------------------------------------------------------------------------------

def test_loss_curve_marks_each_phase_with_a_labelled_dotted_line():
    losses = [{"step": s, "loss": 1.0 / s} for s in range(1, 9)]
    fig = loss_curve_figure(losses, None, band_phases("curriculum", 8)).to_plotly_json()
    # losses are logged under the step count after their step: N3 trains 0-based steps 2-3, logged as 3 and 4
    assert phase_lines(fig) == [(0.5, "N4"), (2.5, "N3"), (4.5, "N2"), (6.5, "N1")]
    assert all(s["type"] == "line" and s["yref"] == "y domain" for s in fig["layout"]["shapes"])
    for phases in (None, [], band_phases("random", 8)):  # other callers and unscheduled orders: no lines
        assert not loss_curve_figure(losses, None, phases).layout.shapes
    marked = loss_curve_figure(losses, [{"step": 4, "knn_accuracy": 0.5}], [{"step": 3, "label": "<b>x</b>"}])
    assert [t.name for t in marked.data] == ["training loss", "kNN accuracy"]
    assert marked.layout.annotations[0].text == "&lt;b&gt;x&lt;/b&gt;"  # labels are escaped like hover texts


def test_cka_figure_one_line_per_run_on_an_axis_from_below_the_lowest_value_to_1_with_frozen_layers_shaded():
    curves = {"run a": [0.99, 0.9, 0.4], "run b": [1.0, 0.95, float("nan")]}
    fig = cka_figure(curves, frozen_layers=1, frozen_embeddings=True)
    assert [t.name for t in fig.data] == ["run a", "run b"] and list(fig.data[0].x) == [0, 1, 2]
    assert "CKA %{y:.3f}" in fig.data[0].hovertemplate
    low, high = fig.layout.yaxis.range
    assert 0.35 <= low < 0.4 and 1 < high < 1.1  # below 0.4 (the NaN is left out), above 1
    little = cka_figure({"run": [1.0, 0.999, 0.995]}).layout.yaxis.range
    assert 0.9 < little[0] < 0.995 and 1 < little[1] < 1.01  # a run that changed little still shows where
    (band,) = fig.layout.shapes
    assert (band.x0, band.x1) == (-0.5, 1.5)
    assert not cka_figure(curves).layout.shapes

    def run(run_id: str, layers: int) -> Run:
        return Run(id=run_id, kind="train", status="done", created=0.0, started=None, finished=None,
                   config={"freeze_layers": layers}, progress={}, metrics_before=None, metrics_after=None,
                   history=[], losses=[], artefacts={}, error=None, pid=None, sweep_id=None, cancel_requested=False)

    two = cka_layers_figure(curves, [run("a", 1), run("b", 2)]).to_plotly_json()["layout"]
    assert [(s["x0"], s["x1"]) for s in two["shapes"]] == [(0.5, 1.5), (0.5, 2.5)]
    assert [a["text"] for a in two["annotations"]] == ["frozen in a", "frozen in b"]


# --- Train page ------------------------------------------------------------------------------------------------

def test_mgh_widgets_come_from_its_schema(app):
    at = open_page(app, "app_pages/2_Train.py")
    at.selectbox(key="train:recipe:Supervised").set_value("mgh").run()
    no_errors(at)
    assert at.selectbox(key="train:margin:mgh").label == "Scale" and at.selectbox(key="train:margin:mgh").value == 20
    order = at.selectbox(key="train:order")
    assert order.label == "Band order" and order.options == list(ORDERS) and order.value == "curriculum"
    assert at.text_input(key="train:bands").value == RECIPES["mgh"].param("bands").default
    assert at.number_input(key="train:k").label == "Positives (k)"
    assert at.number_input(key="train:threshold").label == "Cosine threshold"


def test_mgh_preview_shows_band_cards_and_one_anchor_with_its_negatives(app):
    at = pick_mgh(open_page(app, "app_pages/2_Train.py"))
    button(at, "Preview examples").click().run()
    no_errors(at)
    cards = {m.label: m.value for m in at.metric}
    used, available = (int(cards[k].replace(",", "")) for k in ("Rows used (N)", "Rows available"))
    assert 0 < used <= available and int(cards["Anchors used"].replace(",", "")) > 0
    cosines = [float(cards[f"N{b} mean cosine"]) for b in range(1, 5)]
    assert cosines == sorted(cosines, reverse=True)  # N1 is the hardest band: nearest to the anchor
    assert "Available" not in cards  # not the generic mined-examples cards
    (table,) = at.dataframe
    frame = table.value
    assert list(frame.columns) == ["role", "ranks", "text", "label", "reference cosine"]
    labels = frame["label"].tolist()
    assert all(labels) and labels[0] == labels[1] and labels[0] not in labels[2:]  # negatives: other labels
    assert list(frame["role"]) == ["anchor", "positive", "N1", "N2", "N3", "N4"]
    assert list(frame["ranks"]) == ["", "", "1", "2", "3", "4"]
    shown = frame["reference cosine"].tolist()
    negatives = [float(c) for c in shown[2:]]
    assert shown[:2] == ["", ""] and negatives == sorted(negatives, reverse=True) and -1 <= negatives[-1] <= 1
    assert frame["text"].str.len().gt(0).all()
    assert any("N1 = ranks 1, hardest" in c.value and "See Definitions" in c.value for c in at.caption)


@pytest.mark.parametrize("bands", ["", "5,20,50", "20,5,50,100", "1,2,3,99999", "nan,1,2,3", "x" * 5000])
def test_a_bad_band_edges_value_is_one_error_line(app, bands):
    at = pick_mgh(open_page(app, "app_pages/2_Train.py"), bands)
    assert not at.exception
    (error,) = at.error
    said = "bands is empty" if bands == "" else "bands must be "  # an emptied box is not "not text" (issue 51)
    assert error.value.startswith(said) and "\n" not in error.value
    assert button(at, "Preview examples").disabled
    assert next(b for b in at.button if b.label == "Start training").disabled


def test_band_edges_the_corpus_cannot_fill_say_what_to_change(app):
    at = pick_mgh(open_page(app, "app_pages/2_Train.py"), "700,800,900,1000")  # N2.. beyond the other-label texts
    button(at, "Preview examples").click().run()
    assert not at.exception
    (error,) = at.error
    assert error.value.startswith("No anchor has both") and "lower the band edges" in error.value


def test_an_mgh_run_started_on_the_page_marks_its_bands_on_the_loss_curve(app, monkeypatch):
    monkeypatch.setattr(core.jobs.launch, "start",
                        lambda store, run_id: core.jobs.worker.execute(store, run_id) or os.getpid())
    at = pick_mgh(open_page(app, "app_pages/2_Train.py"))
    at.selectbox(key="train:order").set_value("reverse")
    for key, value in TINY_MGH.items():
        at.number_input(key=key).set_value(value)
    button(at, "Start training").click().run()
    no_errors(at)
    [run] = RunStore().list()
    assert run.status == "done" and run.config["recipe"] == "mgh" and run.config["order"] == "reverse"
    assert run.progress["phases"] == band_phases("reverse", 4)
    (fig,) = figures(at)
    assert phase_lines(fig) == [(0.5, "N1"), (1.5, "N2"), (2.5, "N3"), (3.5, "N4")]


# --- Layers page ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mgh_layers_home")


@pytest.fixture(scope="module")
def trained(home, tiny_model_dir) -> str:
    """A finished mgh run on the demo corpus (first layer frozen)."""
    return train_tiny_run(home, tiny_model_dir, recipe="mgh", bands=SMALL_BANDS, freeze_layers=1)


@pytest.fixture
def layers_app(monkeypatch, home, tiny_model_dir) -> AppTest:
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("CONTRASTLAB_HOME", str(home))
    return AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S)


def test_layers_without_a_run_say_where_the_cka_figure_comes_from(app):
    at = open_page(app, "app_pages/4_Layers.py")
    no_errors(at)
    (fig,) = figures(at)  # the reference's kNN curve only
    assert fig["layout"]["title"]["text"] == "kNN accuracy by layer"
    captions = [c.value for c in at.caption]
    assert captions[0].count("cosine similarity of the mean-pooled output") == 1
    assert "The CKA figure appears once a fine-tuned run is picked above." in captions
    assert any(c.startswith("Linear CKA") for c in captions)


def test_layers_with_a_run_show_which_layers_changed_without_a_second_pass(layers_app, trained, monkeypatch):
    at = open_page(layers_app, "app_pages/4_Layers.py")
    no_errors(at)
    assert at.multiselect(key="layers_runs").value == [trained]
    knn, cka = figures(at)
    assert cka["layout"]["title"]["text"].startswith("Linear CKA to the reference")
    assert cka["layout"]["showlegend"] is True  # one run still gets its name shown
    (line,) = cka["data"]
    assert line["name"].endswith(trained) and line["name"] == knn["data"][1]["name"]
    assert len(line["y"]) == len(knn["data"][0]["y"]) == 3  # embeddings + the tiny model's 2 layers
    assert all(0.0 <= v <= 1.0 + 1e-9 for v in line["y"]) and min(line["y"]) < 1.0  # training changed something
    assert [(s["x0"], s["x1"]) for s in cka["layout"]["shapes"]] == [(0.5, 1.5)]  # layer 1 frozen
    assert not any("appears once" in c.value for c in at.caption)

    encodes: list[int] = []
    real = core.models.encode.encode
    monkeypatch.setattr(core.models.encode, "encode", lambda *a, **kw: encodes.append(1) or real(*a, **kw))
    at.multiselect(key="layers_runs").unselect(trained).run()
    no_errors(at)
    assert len(figures(at)) == 1 and any("appears once" in c.value for c in at.caption)
    at.multiselect(key="layers_runs").select(trained).run()
    no_errors(at)
    assert len(figures(at)) == 2 and encodes == []  # both figures from the session cache

    fresh = open_page(AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S), "app_pages/4_Layers.py")
    no_errors(fresh)  # a new session: both figures again, CKA from the layer states the kNN curves cached on disk
    assert figures(fresh)[1]["data"][0]["y"] == line["y"] and encodes == []
