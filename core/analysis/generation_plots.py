"""Figures of generated training data's quality under the reference model, from the reports of
core.generation.quality (passed in as dicts: analysis may not import generation): how seed 003's lists drift from
their anchor by position, and how seed 004's negatives fall in similarity to the query beside the paper's Table 4."""

from __future__ import annotations

import plotly.graph_objects as go

from core.analysis.plots import PALETTE, PUBLISHED_COLOUR, plot_text

POSITIVE_COLOUR, NEGATIVE_COLOUR = "#2b8a3e", "#1f77b4"


def _ci_text(figure: dict) -> str:
    """A figure's 95% interval for a hover, or why there is none."""
    low, high = figure["ci"]
    return "no 95% CI (one value)" if low is None or high is None else f"95% CI {low:.3f}–{high:.3f}"


def list_curve_figure(by_method: dict[str, dict]) -> go.Figure:
    """Mean cosine to the anchor by list position (2 onward), one line per method (by_method: a name -> its
    list_quality report) over a shaded band of its 95% interval (bootstrap over lists; narrowed to the mean where a
    position has one list); the hover gives the interval and how many lists reach the position. A list drifts as
    asked where its line falls."""
    fig = go.Figure()
    for i, (method, report) in enumerate(by_method.items()):
        colour = PALETTE[i % len(PALETTE)]
        points = report["positions"]
        x = [p["position"] for p in points]
        low = [p["mean"] if p["ci"][0] is None else p["ci"][0] for p in points]
        high = [p["mean"] if p["ci"][1] is None else p["ci"][1] for p in points]
        fig.add_trace(go.Scatter(x=x + x[::-1], y=high + low[::-1], fill="toself", fillcolor=colour, opacity=0.2,
                                 line={"width": 0}, mode="lines", hoverinfo="skip", showlegend=False,
                                 legendgroup=str(i), name=plot_text(method)))
        tau = report["tau"]["mean"]
        fig.add_trace(go.Scatter(
            x=x, y=[p["mean"] for p in points], mode="lines+markers", name=plot_text(method), legendgroup=str(i),
            line={"color": colour}, marker={"color": colour, "size": 6},
            customdata=[[_ci_text(p), p["n"], "–" if tau is None else f"{tau:.2f}"] for p in points],
            hovertemplate="%{fullData.name} · position %{x}: cosine %{y:.3f}<br>%{customdata[0]} · "
                          "%{customdata[1]:,} lists · mean τ %{customdata[2]}<extra></extra>"))
    fig.update_layout(title="Cosine to the anchor by list position (reference model)<br><sup>bands: 95% CI of the "
                            "mean (bootstrap over lists); a list drifts as asked where its line falls</sup>",
                      hovermode="closest", legend_title_text="method")
    fig.update_xaxes(title_text="position in the list (1 = anchor)", dtick=1)
    fig.update_yaxes(title_text="mean cosine to the anchor", tickformat=".2f")
    return fig


def negatives_figure(quality: dict, published: dict | None = None) -> go.Figure:
    """Mean cosine to the query of the positive and of N1..N4 (a negatives_quality report) as points with their 95%
    intervals, on an axis that fits them (bars from 0 hid a fall of a few hundredths); `published` ({"N1": 0.881,
    ...}: another model's means, seed 004's Table 4) as markers beside them, to compare the shape of the fall
    rather than the level, which depends on the model."""
    roles = list(quality["means"])
    means = [quality["means"][role] for role in roles]
    fig = go.Figure(go.Scatter(
        x=roles, y=[m["mean"] for m in means], name="this file (reference model)", mode="lines+markers",
        line={"color": NEGATIVE_COLOUR, "width": 1, "dash": "dot"},
        marker={"size": 12, "color": [POSITIVE_COLOUR if role == "positive" else NEGATIVE_COLOUR for role in roles]},
        error_y={"type": "data", "symmetric": False, "color": "dimgrey", "thickness": 1.5, "width": 8,
                 "array": [0 if m["ci"][1] is None else m["ci"][1] - m["mean"] for m in means],
                 "arrayminus": [0 if m["ci"][0] is None else m["mean"] - m["ci"][0] for m in means]},
        customdata=[[_ci_text(m), m["n"]] for m in means],
        hovertemplate="%{x}: cosine %{y:.3f}<br>%{customdata[0]} · %{customdata[1]:,} rows<extra></extra>"))
    shown = [role for role in roles if role in (published or {})]
    if shown:
        fig.add_trace(go.Scatter(
            x=shown, y=[published[role] for role in shown], mode="markers", name="published (other model)",
            marker={"symbol": "diamond", "size": 11, "color": PUBLISHED_COLOUR, "line": {"width": 1, "color": "white"}},
            hovertemplate="%{x}: published %{y:.3f} (another embedding model)<extra></extra>"))
    ordered = quality["ordered"]
    note = ("" if ordered["share"] is None else
            f"; N1 > N2 > N3 > N4 in {ordered['share']:.0%} of {ordered['n']:,} rows")
    fig.update_layout(title=f"Cosine to the query: positive and negatives N1–N4 (reference model)<br><sup>error bars: "
                            f"95% CI of the mean (bootstrap over rows){note}</sup>",
                      hovermode="closest", legend={"orientation": "h", "yanchor": "top", "y": -0.15})
    fig.update_xaxes(title_text="text (negatives hardest first)")
    fig.update_yaxes(title_text="mean cosine to the query", tickformat=".2f")
    return fig
