"""The kNN classifier's confusion matrix as a Plotly heatmap (docs/definitions.md, kNN accuracy); the counts come
from core.evaluation.per_class. Pure function, no Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.analysis.plots import plot_text

TEXT_CLASSES = 20  # up to this many classes each cell shows its count; beyond, the counts show on hover only
TICK_CHARS = 24


def _tick(name: str) -> str:
    return plot_text(name if len(name) <= TICK_CHARS else name[: TICK_CHARS - 1] + "…")


def confusion_figure(classes: Sequence[str], counts: np.ndarray, title: str) -> go.Figure:
    """True class rows x predicted class columns. The colour is each row's share (the diagonal cell is the class's
    kNN recall), so a class with 9 texts reads on the same scale as one with 138; each cell shows its count, and
    hover shows count and share. A class without targets has an empty row. `title` is plotly markup (a user
    string in it is the caller's to pass through plot_text)."""
    counts = np.asarray(counts, dtype=np.int64)
    n = len(classes)
    if counts.shape != (n, n):
        raise ValueError(f"counts is {counts.shape} but there are {n} classes")
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(totals > 0, counts / totals, np.nan)
    names = [plot_text(c) for c in classes]
    custom = np.empty((n, n, 4), dtype=object)
    for i in range(n):
        for j in range(n):
            custom[i, j] = (names[i], names[j], int(counts[i, j]), int(totals[i, 0]))
    positions = list(range(n))
    fig = go.Figure(go.Heatmap(
        z=share, x=positions, y=positions, customdata=custom, zmin=0.0, zmax=1.0, colorscale="Blues",
        hoverongaps=False, text=counts if n <= TEXT_CLASSES else None,
        texttemplate="%{text}" if n <= TEXT_CLASSES else None,
        colorbar={"title": {"text": "share of<br>true class"}, "tickformat": ".0%", "thickness": 10},
        hovertemplate="true: <b>%{customdata[0]}</b><br>predicted: <b>%{customdata[1]}</b><br>"
                      "%{customdata[2]} of %{customdata[3]} texts (%{z:.1%})<extra></extra>",
    ))
    ticks = {"tickmode": "array", "tickvals": positions, "ticktext": [_tick(c) for c in classes], "showgrid": False,
             "zeroline": False}
    fig.update_xaxes(title_text="predicted class", side="bottom", **ticks)
    fig.update_yaxes(title_text="true class", autorange="reversed", **ticks)
    side = min(900, max(320, 30 * n + 200))
    fig.update_layout(title=title, height=side, plot_bgcolor="white")
    return fig
