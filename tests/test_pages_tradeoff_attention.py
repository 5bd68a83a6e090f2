"""The Trade-off and Attention pages through AppTest, before and after a finished run: they render, say what to
do when there is no run, react to the margin slider and the quick-model button, and never show a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import core.jobs.quick
from core.jobs import launch, worker
from core.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120  # the first run imports torch and sentence-transformers; the quick run trains in-process


def page(name: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT_S).run()
    return at.switch_page(f"app_pages/{name}")


def markdown(at: AppTest, needle: str) -> str:
    return next(m.value for m in at.markdown if needle in m.value)


@pytest.fixture
def tiny_env(monkeypatch, tiny_model_dir) -> None:
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))


def charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def ok(at: AppTest) -> AppTest:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def test_attention_without_a_run_and_with_a_typed_text(tiny_env, monkeypatch):
    import core.analysis.attention

    calls = []
    real = core.analysis.attention.compare_attention
    monkeypatch.setattr(core.analysis.attention, "compare_attention", lambda *a: calls.append(a[2]) or real(*a))
    at = ok(page("6_Attention.py").run())
    assert any("No finished run" in i.value for i in at.info)
    heatmaps, _, _, bars = charts(at)  # the reference's head grid, enlarged head and summed map, then the bars
    assert "Reference" in heatmaps["layout"]["title"]["text"]
    assert [t.get("visible", True) for t in bars["data"]] == [True, False]  # the reference's weights alone

    at.radio(key="attention_source").set_value("Type a text").run()
    assert not at.exception and [e.value for e in at.error] == ["Type a text first."] and not charts(at)
    at.text_input(key="attention_typed").set_value("the film was good").run()
    ok(at)
    assert charts(at)[-1]["data"][0]["customdata"] == ["[CLS]", "the", "film", "was", "good", "[SEP]"]
    assert calls[-1] == "the film was good"
    before = len(calls)
    at.switch_page("app_pages/4_Layers.py").run()
    shown = charts(ok(at.switch_page("app_pages/6_Attention.py").run()))  # back again: drawn from the session cache
    assert len(calls) == before and len(shown) == 4


def test_tradeoff_slider_quick_model_then_both_pages_with_the_run(tiny_env, monkeypatch):
    monkeypatch.setattr(launch, "start", worker.execute)  # the quick run trains inside the script run
    monkeypatch.setattr(core.jobs.quick, "QUICK_BUDGET", {**core.jobs.quick.QUICK_BUDGET, "examples": 32})
    at = ok(page("5_Trade-off.py").run())
    assert [t["name"] for t in charts(at)[0]["data"]] == ["reference", "Pareto front"]
    assert len(charts(at)) == 2  # the trade-off and the active-share curve
    assert any("Only the reference model so far" in i.value for i in at.info)
    assert "mined triplets are active" in markdown(at, "margin **0.1**")

    at.select_slider(key="tradeoff_margin").set_value(10.0).run()
    ok(at)
    assert markdown(at, "margin **10**").startswith("**100%** of the ")

    next(b for b in at.button if b.key == "quick_train").click().run()
    ok(at)
    plot = charts(at)[0]
    assert [t["name"] for t in plot["data"]] == ["reference", "triplet · 32 examples × 1 epoch",  # the quick point
                                                 "Pareto front"]
    assert plot["data"][1]["text"] == ["triplet m10 (quick)"]
    run_id = RunStore().list()[0].id
    assert RunStore().get(run_id).corpus_name == "demo_corpus.csv"  # named as the page's other runs are
    name, recipe, margin = plot["data"][1]["customdata"][0][:3]  # what the hover shows
    assert (name, recipe, margin) == (f"{run_id} (quick)", "triplet", "10")
    assert any("quick model at margin 10 is on the plot" in c.value for c in at.caption)
    assert not any("Only the reference model" in i.value for i in at.info)

    at.number_input(key="tradeoff_k").set_value(4).run()
    ok(at)
    assert "P@4" in charts(at)[0]["layout"]["title"]["text"] and len(charts(at)[0]["data"]) == 3

    at = ok(page("6_Attention.py").run())
    assert at.selectbox(key="attention_run").value == run_id
    _, tuned_map, *_, bars = charts(at)  # head grids, enlarged heads, summed maps: reference and fine-tuned each
    assert "Fine-tuned" in tuned_map["layout"]["title"]["text"]
    assert [t["name"] for t in bars["data"]] == ["reference", "fine-tuned"]
    assert "**Lost weight:**" in markdown(at, "**Gained weight:**")
    assert len(at.get("download_button")) == 7  # one per chart
