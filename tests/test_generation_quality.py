"""The quality of generated training data under a reference model (core.generation.quality) and its figures
(core.analysis.generation_plots): exact figures from hand-built embeddings with known cosines (unit vectors at
chosen angles), each distinct text embedded once, leakage as the corpus checks normalise it, no NaN in any report."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import core.models.encode as encode_module
from core.analysis.generation_plots import list_curve_figure, negatives_figure
from core.errors import UserError
from core.evaluation.uncertainty import proportion_ci
from core.generation.quality import (
    PUBLISHED_NEGATIVES,
    cosines,
    leakage,
    list_quality,
    negatives_quality,
    reference_embed,
)


def at(degrees: float) -> np.ndarray:
    """A unit vector in the plane at `degrees` from the x axis: its cosine to the x axis is cos(degrees)."""
    return np.array([math.cos(math.radians(degrees)), math.sin(math.radians(degrees)), 0.0])


def c(degrees: float) -> float:
    return math.cos(math.radians(degrees))


class Spy:
    """An embed callable from a text -> vector table that records every call."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors, self.calls = vectors, []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def angles(**by_text: float) -> dict[str, np.ndarray]:
    return {text: at(deg) for text, deg in by_text.items()}


FALLING = ["a0", "a1", "a2", "a3", "a4"]  # 10, 20, 30, 40 degrees from the anchor: strictly falling cosines
SHUFFLED = ["b0", "b1", "b2", "b3"]  # 30, 10, 20 degrees: not in order
VECTORS = angles(a0=0, a1=10, a2=20, a3=30, a4=40, b0=0, b1=30, b2=10, b3=20)


def test_lists_give_exact_means_taus_and_monotone_share_embedding_each_text_once():
    spy = Spy(VECTORS)
    q = list_quality([FALLING, SHUFFLED, ["c0"], ["a0", "a2"]], spy)
    assert len(spy.calls) == 1 and sorted(spy.calls[0]) == sorted(set(FALLING + SHUFFLED + ["a0", "a2"]))
    assert len(spy.calls[0]) == len(set(spy.calls[0]))  # "a0" and "a2" appear in two lists, embedded once
    means = {p["position"]: (p["mean"], p["n"]) for p in q["positions"]}
    assert means.keys() == {2, 3, 4, 5}
    assert means[2] == (pytest.approx((c(10) + c(30) + c(20)) / 3), 3)
    assert means[3] == (pytest.approx((c(20) + c(10)) / 2), 2)
    assert means[4] == (pytest.approx((c(30) + c(20)) / 2), 2)
    assert means[5] == (pytest.approx(c(40)), 1)
    five = next(p for p in q["positions"] if p["position"] == 5)
    assert five["ci"] == [None, None]  # one list reaches position 5: no interval
    two = next(p for p in q["positions"] if p["position"] == 2)
    assert two["ci"][0] <= two["mean"] <= two["ci"][1]
    # FALLING: tau -1; SHUFFLED (positions 2, 3, 4 at cos 30, 10, 20): 2 concordant pairs, 1 discordant -> 1/3
    assert q["tau"]["per_list"] == [pytest.approx(-1.0), pytest.approx(1 / 3), None, None]
    assert q["tau"]["mean"] == pytest.approx(-1 / 3) and q["tau"]["n"] == 2
    assert q["monotone"] == {"share": 0.5, "ci": list(proportion_ci(0.5, 2)), "n": 2, "count": 1}
    assert q["skipped"] == {"anchor_only": 1, "undefined_cosines": 0, "no_tau_short": 1, "no_tau_constant": 0}
    assert q["lists"] == 4
    json.dumps(q, allow_nan=False)


def test_a_strictly_falling_list_alone_has_tau_minus_one_and_share_one():
    q = list_quality([FALLING], Spy(VECTORS))
    assert q["tau"]["mean"] == pytest.approx(-1.0) and q["tau"]["ci"] == [None, None]
    assert (q["monotone"]["share"], q["monotone"]["count"]) == (1.0, 1)


def test_constant_cosines_have_no_tau_and_are_not_monotone():
    vectors = angles(x0=0, x1=25, x2=-25, x3=25)  # the same cosine three times
    q = list_quality([["x0", "x1", "x2", "x3"], FALLING], Spy({**vectors, **VECTORS}))
    assert q["tau"]["per_list"] == [None, pytest.approx(-1.0)]
    assert q["skipped"]["no_tau_constant"] == 1
    assert (q["monotone"]["share"], q["monotone"]["n"]) == (0.5, 2)


def test_negatives_give_the_table_4_means_and_ordering_shares():
    vectors = angles(q=0, p1=5, p2=15, n11=10, n12=20, n13=30, n14=40, n21=10, n22=30, n23=20, n24=40)
    rows = [("q", "p1", ["n11", "n12", "n13", "n14"]), ("q", "p2", ["n21", "n22", "n23", "n24"])]
    spy = Spy(vectors)
    q = negatives_quality(rows, spy)
    assert len(spy.calls) == 1 and len(spy.calls[0]) == len(vectors)  # the query of both rows embedded once
    expected = {"positive": (c(5) + c(15)) / 2, "N1": c(10), "N2": (c(20) + c(30)) / 2,
                "N3": (c(30) + c(20)) / 2, "N4": c(40)}
    assert list(q["means"]) == ["positive", "N1", "N2", "N3", "N4"]
    for role, mean in expected.items():
        assert q["means"][role]["mean"] == pytest.approx(mean) and q["means"][role]["n"] == 2
    assert q["means"]["N1"]["ci"] == [pytest.approx(c(10)), pytest.approx(c(10))]  # both rows agree
    assert q["ordered"] == {"share": 0.5, "ci": list(proportion_ci(0.5, 2)), "n": 2, "count": 1}
    assert (q["positive_above_n1"]["share"], q["positive_above_n1"]["count"]) == (0.5, 1)  # 5 above 10, 15 not
    assert q["rows"] == 2 and q["undefined_cosines"] == 0
    json.dumps(q, allow_nan=False)


def test_a_tie_between_negatives_is_not_an_ordered_row():
    vectors = angles(q=0, p=5, n1=10, n2=20, n3=-20, n4=40)  # N2 and N3 equally close to the query
    q = negatives_quality([("q", "p", ["n1", "n2", "n3", "n4"])], Spy(vectors))
    assert (q["ordered"]["share"], q["ordered"]["count"], q["ordered"]["n"]) == (0.0, 0, 1)


def test_zero_and_non_finite_vectors_are_skipped_and_counted_never_nan():
    vectors = {**VECTORS, "zero": np.zeros(3), "nan": np.array([np.nan, 1.0, 0.0]), "z0": np.zeros(3)}
    q = list_quality([["a0", "a1", "zero", "a3", "nan"], ["z0", "a1", "a2"], FALLING], Spy(vectors))
    assert q["skipped"]["undefined_cosines"] == 4  # two in the first list, both of the list with a zero anchor
    assert q["tau"]["per_list"] == [pytest.approx(-1.0), None, pytest.approx(-1.0)]  # 10 and 30 degrees remain
    assert {p["position"]: p["n"] for p in q["positions"]} == {2: 2, 3: 1, 4: 2, 5: 1}
    json.dumps(q, allow_nan=False)
    vectors = angles(q=0, p=5, n1=10, n2=20, n3=30, n4=40) | {"zq": np.zeros(3), "zn": np.zeros(3)}
    only_undefined = negatives_quality([("zq", "p", ["n1", "n2", "n3", "n4"])], Spy(vectors))
    assert only_undefined["means"]["N1"] == {"mean": None, "ci": [None, None], "n": 0}
    assert only_undefined["ordered"] == {"share": None, "ci": [None, None], "n": 0, "count": 0}
    mixed = negatives_quality([("q", "p", ["n1", "zn", "n3", "n4"]), ("zq", "p", ["n1", "n2", "n3", "n4"])],
                              Spy(vectors))
    assert mixed["undefined_cosines"] == 6 and mixed["ordered"]["n"] == 0 and mixed["positive_above_n1"]["n"] == 1
    for report in (only_undefined, mixed):
        json.dumps(report, allow_nan=False)
        negatives_figure(report, PUBLISHED_NEGATIVES).to_json()
    assert math.isnan(cosines(np.zeros((1, 3)), at(10)[None])[0])


def test_empty_inputs_are_a_user_error_before_anything_is_embedded():
    spy = Spy(VECTORS)
    with pytest.raises(UserError, match="no lists"):
        list_quality([], spy)
    with pytest.raises(UserError, match="None of the 2 lists has a member after its anchor"):
        list_quality([["a0"], ["b0"]], spy)
    with pytest.raises(UserError, match="no rows"):
        negatives_quality([], spy)
    with pytest.raises(UserError, match="Row 2 has 3 negatives, not 4"):
        negatives_quality([("a0", "a1", ["a2", "a3", "a4", "b0"]), ("a0", "a1", ["a2", "a3", "a4"])], spy)
    assert spy.calls == []


def test_leakage_compares_as_the_corpus_checks_do():
    test_texts = ["the cat sat.", "A DOG RAN", "Café au lait"]
    generated = ["The  Cat   sat.", "a dog ran", "  a dog ran ", "A dog ran!", "cafe au lait", "new text"]
    found = leakage(generated, test_texts)
    # case, spacing and accents aside; punctuation is a difference (leak_text keeps it)
    assert found == {"leaked": 4, "of": 6, "examples": ["The  Cat   sat.", "a dog ran", "  a dog ran ", "cafe au lait"]}
    many = leakage([f"Text {i}" for i in range(8)] * 2, [f"text {i}" for i in range(8)])
    assert (many["leaked"], many["of"], many["examples"]) == (16, 16, [f"Text {i}" for i in range(5)])
    assert leakage([], test_texts) == {"leaked": 0, "of": 0, "examples": []}


def test_the_reference_model_encodes_each_distinct_text_once_and_reuses_the_cache(tiny_model, monkeypatch):
    encoded: list[list[str]] = []
    real = encode_module.encode

    def counting(model, texts, **kwargs):
        encoded.append(list(texts))
        return real(model, texts, **kwargs)

    monkeypatch.setattr(encode_module, "encode", counting)
    lists = [["a man plays a guitar.", "a man plays a violin.", "a woman sings a song."],
             ["the dog runs.", "a man plays a violin.", "the cat sleeps."]]
    first = list_quality(lists, reference_embed(tiny_model))
    assert len(encoded) == 1 and sorted(encoded[0]) == sorted({t for m in lists for t in m})
    again = list_quality(lists, reference_embed(tiny_model))
    assert len(encoded) == 1 and again == first  # from the disk cache
    rows = [("the dog runs.", "a dog is running.", ["a cat runs.", "the dog sleeps.", "a car drives.", "rain."])]
    report = negatives_quality(rows, reference_embed(tiny_model))
    assert len(encoded) == 2 and len(encoded[1]) == 6 and report["means"]["N4"]["n"] == 1
    json.dumps(first, allow_nan=False)
    json.dumps(report, allow_nan=False)


def test_the_figures_draw_the_reports_means():
    falling = list_quality([FALLING, SHUFFLED], Spy(VECTORS))
    other = list_quality([FALLING], Spy(VECTORS))
    fig = list_curve_figure({"directional": falling, "<b>stepwise</b>": other})
    assert len(fig.data) == 4  # a band and a line per method
    lines = [trace for trace in fig.data if trace.mode == "lines+markers"]
    for trace, report in zip(lines, (falling, other)):
        assert list(trace.x) == [p["position"] for p in report["positions"]]
        assert list(trace.y) == [p["mean"] for p in report["positions"]]
    assert lines[1].name == "&lt;b&gt;stepwise&lt;/b&gt;"  # a method name is shown, not read as markup
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text and fig.layout.title.text
    fig.to_json()

    vectors = angles(q=0, p=5, n1=10, n2=20, n3=30, n4=40, m1=12, m2=18, m3=33, m4=45)
    quality = negatives_quality([("q", "p", ["n1", "n2", "n3", "n4"]), ("q", "p", ["m1", "m2", "m3", "m4"])],
                                Spy(vectors))
    alone = negatives_figure(quality)
    assert len(alone.data) == 1
    assert list(alone.data[0].x) == ["positive", "N1", "N2", "N3", "N4"]
    assert list(alone.data[0].y) == [quality["means"][role]["mean"] for role in alone.data[0].x]
    beside = negatives_figure(quality, PUBLISHED_NEGATIVES)
    assert len(beside.data) == 2 and beside.data[1].name == "published (other model)"
    assert list(beside.data[1].x) == ["N1", "N2", "N3", "N4"] and list(beside.data[1].y) == [0.881, 0.857, 0.845, 0.793]
    assert "100% of 2 rows" in beside.layout.title.text
    beside.to_json()
