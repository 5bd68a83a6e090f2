"""Maps and Layers pages through AppTest on the demo corpus: without a finished run they say how to get one
and still show the reference; with one they compare, list neighbours, and re-plot without recomputing.

One home serves the whole module, so the run trained for the later tests starts from the reference
embeddings the first tests cached (the tests are independent; the order only saves time)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import core.analysis.projection
import core.models.encode
from core.evaluation.uncertainty import proportion_ci
from tests.conftest import train_tiny_run
from ui.run_picker import NO_RUN

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 90  # the first run imports torch and sentence-transformers and encodes the demo corpus
POINTS = 250  # the smallest map size offered: t-SNE stays quick


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pages_home")


@pytest.fixture(scope="module")
def trained(home, tiny_model_dir) -> str:
    """A finished train run on the demo corpus, its first layer frozen (shaded on the Layers page)."""
    return train_tiny_run(home, tiny_model_dir, freeze_layers=1)


@pytest.fixture
def app(monkeypatch, home, tiny_model_dir) -> AppTest:
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("CONTRASTLAB_HOME", str(home))
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT_S).run()


def spies(monkeypatch) -> dict[str, list]:
    """Count encoder forward passes and projections from here on."""
    calls: dict[str, list] = {"encode": [], "project": []}
    for module, name, counter in ((core.models.encode, "encode", "encode"), (core.analysis.projection, "tsne", "project"),
                                  (core.analysis.projection, "umap_2d", "project")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *a, _real=real, _c=counter, **kw: calls[_c].append(1) or _real(*a, **kw))
    return calls


def open_page(at: AppTest, page: str) -> AppTest:
    at.switch_page(page)
    at.session_state["maps_points"] = POINTS
    return at.run()


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def infos(at: AppTest) -> list[str]:
    return [i.value for i in at.info]


def test_maps_without_a_run_show_the_reference_map_and_what_to_do(app):
    at = open_page(app, "app_pages/3_Maps.py")
    assert not at.exception and not at.error
    assert NO_RUN in infos(at)
    assert "**Run** · no finished run yet" in [m.value for m in at.sidebar.markdown]
    (fig,) = figures(at)
    assert fig["layout"]["title"]["text"].startswith("Reference · kNN accuracy ")
    assert sum(len(trace["customdata"]) for trace in fig["data"]) == POINTS
    assert len(at.get("download_button")) == 1
    assert not [s for s in at.selectbox if s.label.startswith("Click a point")]  # nothing to compare yet


def test_layers_without_a_run_show_the_reference_curve(app, tiny_model_dir):
    at = open_page(app, "app_pages/4_Layers.py")
    assert not at.exception and not at.error
    assert NO_RUN in infos(at)
    (fig,) = figures(at)
    assert [t["name"] for t in fig["data"]] == ["reference · model"]
    assert len(fig["data"][0]["y"]) == 3  # embeddings + the tiny model's 2 layers
    bars = fig["data"][0]["error_y"]  # each point's 95% interval over the demo corpus's 83 test texts
    for acc, up, down in zip(fig["data"][0]["y"], bars["array"], bars["arrayminus"]):
        assert [acc - down, acc + up] == pytest.approx(list(proportion_ci(acc, 83)))
    assert any(c.value.startswith("Bars: each point's 95% interval over the 83 holdout texts") for c in at.caption)
    assert len(at.get("download_button")) == 1


def test_maps_with_a_run_compare_and_list_neighbours_without_recomputing(app, trained, monkeypatch):
    at = open_page(app, "app_pages/3_Maps.py")
    assert not at.exception and not at.error
    assert NO_RUN not in infos(at)
    assert at.selectbox(key="maps_run").value == trained
    sidebar = [m.value for m in at.sidebar.markdown]  # says which run the page shows, though none was picked
    assert f"**Run** · `{trained}`" in sidebar and "none" not in " ".join(sidebar)
    assert any(c.value.endswith("newest finished") for c in at.sidebar.caption)
    ref, tuned = figures(at)
    assert ref["layout"]["title"]["text"].startswith("Reference · kNN accuracy ")
    assert tuned["layout"]["title"]["text"].startswith("Fine-tuned · kNN accuracy ")
    assert {t["name"]: t["marker"]["color"] for t in ref["data"]} == \
        {t["name"]: t["marker"]["color"] for t in tuned["data"]}
    assert len(at.get("download_button")) == 2

    monkeypatch.setattr(core.analysis.projection, "umap_2d",  # numba compiles UMAP for ~20 s; the page only dispatches
                        lambda emb, init=None, seed=0, progress=None:
                        np.random.default_rng(seed).normal(size=(len(emb), 2)))
    calls = spies(monkeypatch)
    picker = next(s for s in at.selectbox if s.label.startswith("Click a point"))
    picker.set_value(0).run()
    assert not at.exception and not at.error
    kept_or_lost, kept_or_new = (set(df.value["status"]) for df in at.dataframe)
    assert kept_or_lost <= {"kept", "lost"} and kept_or_new <= {"kept", "new"}
    assert any("picked" == t["name"] for t in figures(at)[1]["data"])  # the picked text is ringed
    at.session_state["maps_selected"] = [picker.options[1].split(" · ")[0]]  # as a box on the t-SNE map selects
    at.run()
    assert any(h.value.startswith("Selected texts") for h in at.subheader)
    at.radio(key="maps_method").set_value("UMAP").run()
    assert not at.exception and not at.error and figures(at)[0]["layout"]["xaxis"]["title"]["text"] == "UMAP 1"
    assert not any(h.value.startswith("Selected texts") for h in at.subheader)  # the box was on the other map
    at.radio(key="maps_method").set_value("t-SNE").run()
    assert calls["encode"] == [] and calls["project"] == [1, 1]  # the two UMAP maps; t-SNE maps from cache


def test_layers_with_a_run_plot_both_curves_and_shade_frozen_layers(app, trained, monkeypatch):
    at = open_page(app, "app_pages/4_Layers.py")
    assert not at.exception and not at.error
    assert at.multiselect(key="layers_runs").value == [trained]
    fig, _cka = figures(at)
    names = [t["name"] for t in fig["data"]]
    assert names[0] == "reference · model" and names[1].endswith(trained)
    assert [(s["x0"], s["x1"]) for s in fig["layout"]["shapes"]] == [(0.5, 1.5)]  # layer 1 frozen

    calls = spies(monkeypatch)
    at.multiselect(key="layers_runs").unselect(trained).run()
    at.multiselect(key="layers_runs").select(trained).run()
    assert not at.exception and calls["encode"] == []
