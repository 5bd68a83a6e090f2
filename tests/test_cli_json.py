"""`--json` prints strict JSON (issue 33): a figure with no value (an interval on one target, a correlation of
constant scores) is null, never a bare NaN or Infinity that a strict reader refuses."""

from __future__ import annotations

import json
import math

import numpy as np

import core.cli as cli


def test_non_finite_figures_print_as_null(monkeypatch, capsys):
    result = {"polarity_ci": [math.nan, math.nan], "spread": math.inf, "rows": [{"low": -math.inf, "n": 3}],
              "kept": np.float64("nan"), "name": "NaN", "fine": 0.5, "pair": (1.0, math.nan)}
    monkeypatch.setitem(cli.COMMANDS, "runs", (lambda args: result, print))
    assert cli.main(["runs", "--json"]) == 0
    out = capsys.readouterr().out
    parsed = json.loads(out, parse_constant=lambda name: pytest_fail(name))
    assert parsed == {"polarity_ci": [None, None], "spread": None, "rows": [{"low": None, "n": 3}], "kept": None,
                      "name": "NaN", "fine": 0.5, "pair": [1.0, None]}


def pytest_fail(name: str) -> None:
    raise AssertionError(f"bare {name} in the JSON output")
