"""Plotly figure builders for the pages: pure functions returning go.Figure, no Streamlit.

Plotly reads a subset of HTML (<b>, <a>, <br>, ...) in every string it draws (legend names, tick labels, hover
labels, annotations), so every user string (texts, class labels, tokens, run and recipe names) goes through
`plot_text` here, and hover templates name a trace's label by reference (%{fullData.name}), never by value.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from core.evaluation.headline import HEADLINE
from core.evaluation.pareto import pareto_front

PALETTE = qualitative.Plotly + qualitative.D3 + qualitative.Alphabet
WEBGL_ABOVE = 3000  # SVG scatter gets sluggish beyond a few thousand points
HOVER_CHARS = 200


def label_colours(labels: Sequence[str]) -> dict[str, str]:
    """Colour per label from the sorted label set, so the reference and fine-tuned maps agree."""
    return {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(sorted(set(map(str, labels))))}


def plot_text(text: object) -> str:
    """A user string as plotly shows it literally: &, < and > escaped. Not html.escape's quotes: plotly decodes only
    a few named entities (&amp; &lt; &gt; among them, &quot; not), so a quote token would show as &quot;."""
    return html.escape(str(text), quote=False)


def hover_text(text: str, limit: int = HOVER_CHARS, width: int = 60) -> str:
    """Truncated, escaped and wrapped, so long or markup-like texts stay readable in a tooltip."""
    short = text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return "<br>".join(plot_text(line) for line in textwrap.wrap(short, width) or [""])


def map_figure(
    coords: np.ndarray,
    labels: Sequence[str],
    texts: Sequence[str],
    title: str,
    highlight: int | None = None,
    method: str = "t-SNE",
) -> go.Figure:
    """One scatter trace per label (legend = classes); customdata[0] is the row in `coords`, so a page can
    map a selected point back to its text. `highlight` rings one point (e.g. the selected one). `title` is plotly
    markup (it may hold <sup>): a user string in it is the caller's to pass through plot_text."""
    coords = np.asarray(coords)
    labels = [str(lab) for lab in labels]
    if not len(coords) == len(labels) == len(texts):
        raise ValueError("coords, labels and texts must have the same length")
    scatter = go.Scattergl if len(coords) > WEBGL_ABOVE else go.Scatter
    fig = go.Figure()
    for lab, colour in label_colours(labels).items():
        rows = [i for i, x in enumerate(labels) if x == lab]
        fig.add_trace(scatter(
            x=coords[rows, 0], y=coords[rows, 1], mode="markers", name=plot_text(lab),
            marker={"color": colour, "size": 6, "opacity": 0.8},
            customdata=[[i, hover_text(texts[i])] for i in rows],
            hovertemplate="<b>%{fullData.name}</b> · #%{customdata[0]}<br>%{customdata[1]}<extra></extra>",
        ))
    if highlight is not None:
        fig.add_trace(go.Scatter(
            x=[coords[highlight, 0]], y=[coords[highlight, 1]], mode="markers", name="selected",
            marker={"symbol": "circle-open", "size": 16, "color": "black", "line": {"width": 2}},
            customdata=[[highlight, hover_text(texts[highlight])]],
            hovertemplate="<b>selected</b> · #%{customdata[0]}<br>%{customdata[1]}<extra></extra>",
        ))
    fig.update_layout(title=title, legend_title_text="label", hovermode="closest")
    fig.update_xaxes(title_text=f"{method} 1", showticklabels=False, zeroline=False)
    fig.update_yaxes(title_text=f"{method} 2", showticklabels=False, zeroline=False, scaleanchor="x")
    return fig


def map_png(coords: np.ndarray, labels: Sequence[str], title: str, path, method: str = "t-SNE") -> None:
    """map_figure as a static PNG at `path` (same points, label colours and square axes), drawn with matplotlib:
    plotly's own image export (kaleido) drives a Chrome or Chromium that a user's machine may not have.
    `title` is plain text; no string is read as matplotlib's $math$ markup."""
    import matplotlib
    from matplotlib.figure import Figure

    coords = np.asarray(coords)
    labels = np.asarray([str(lab) for lab in labels])
    if len(coords) != len(labels):
        raise ValueError("coords and labels must have the same length")
    with matplotlib.rc_context({"text.parse_math": False}):
        fig = Figure(figsize=(9, 7.5), layout="constrained")
        ax = fig.subplots()
        size = float(np.clip(20000 / max(len(coords), 1), 2, 30))  # marker area: smaller as the map fills up
        for lab, colour in label_colours(labels).items():
            rows = labels == lab
            ax.scatter(coords[rows, 0], coords[rows, 1], s=size, c=colour, alpha=0.8, linewidths=0, label=lab)
        ax.set_title(title, loc="left", fontsize=11)
        ax.set_xlabel(f"{method} 1")
        ax.set_ylabel(f"{method} 2")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(title="label", loc="upper left", bbox_to_anchor=(1.01, 1), markerscale=max(1.0, 30 / size) ** 0.5,
                  frameon=False, fontsize=9)
        fig.savefig(path, format="png", dpi=120)


def layer_curve_figure(
    curves: dict[str, list[float]],
    frozen_layers: int = 0,
    frozen_embeddings: bool = False,
) -> go.Figure:
    """kNN accuracy per layer (0 = embeddings), one line per model/run; frozen layers shaded, since
    their curve can only move through what happens below them."""
    fig = go.Figure()
    for name, accs in curves.items():
        fig.add_trace(go.Scatter(
            x=list(range(len(accs))), y=accs, mode="lines+markers", name=plot_text(name),
            hovertemplate="%{fullData.name}<br>layer %{x}: %{y:.3f}<extra></extra>",
        ))
    _shade_frozen(fig, frozen_layers, frozen_embeddings)
    fig.update_layout(title="kNN accuracy by layer", hovermode="x unified", legend_title_text="model")
    fig.update_xaxes(title_text="layer (0 = embeddings)", dtick=1)
    fig.update_yaxes(title_text="kNN accuracy")
    return fig


def cka_figure(
    curves: dict[str, list[float]],
    frozen_layers: int = 0,
    frozen_embeddings: bool = False,
) -> go.Figure:
    """Linear CKA per layer between each run and its reference (1.0 = unchanged), one line per run; frozen layers
    shaded as on the kNN curves."""
    fig = go.Figure()
    for name, values in curves.items():
        fig.add_trace(go.Scatter(
            x=list(range(len(values))), y=values, mode="lines+markers", name=plot_text(name),
            hovertemplate="%{fullData.name}<br>layer %{x}: CKA %{y:.3f}<extra></extra>",
        ))
    _shade_frozen(fig, frozen_layers, frozen_embeddings)
    fig.update_layout(title="Linear CKA to the reference by layer (1.0 = unchanged)", hovermode="x unified",
                      legend_title_text="run", showlegend=True)  # named even when one run is shown
    fig.update_xaxes(title_text="layer (0 = embeddings)", dtick=1)
    # The axis ends a little above 1.0 (an unchanged layer's marker is not cut in half) and starts a little below the
    # lowest value: a run that changed little (CKA 0.99 everywhere) still shows WHICH layers changed most.
    values = [v for values in curves.values() for v in values if math.isfinite(v)]
    low = max(0.0, min(values, default=0.0) - 0.02)
    fig.update_yaxes(title_text="CKA (1.0 = unchanged)", range=[low, 1 + 0.04 * (1 - low)])
    return fig


def _shade_frozen(fig: go.Figure, frozen_layers: int, frozen_embeddings: bool) -> None:
    """Shade the layers a run kept frozen (0.5 wide either side of each), so a reader knows they could only
    change through the layers below them."""
    x0 = -0.5 if frozen_embeddings else 0.5
    x1 = frozen_layers + 0.5
    if x1 > x0:
        fig.add_vrect(x0=x0, x1=x1, fillcolor="grey", opacity=0.15, line_width=0,
                      annotation_text="frozen", annotation_position="top left")


def _margin_text(margin) -> str:
    return "–" if margin is None or (isinstance(margin, float) and math.isnan(margin)) else f"{margin:g}"


def tradeoff_figure(points: list[dict], k: int = 16) -> go.Figure:
    """S@k (x) vs P@k (y) per run with sd error bars; reference as a star, runs grouped by recipe, and the
    Pareto front (over all points, reference included) as a dashed line."""
    fig = go.Figure()
    groups: dict[str, list[dict]] = {}
    for p in points:
        groups.setdefault("reference" if p.get("is_reference") else str(p.get("recipe") or "run"), []).append(p)
    hover = ("<b>%{customdata[0]}</b><br>recipe %{customdata[1]}, margin %{customdata[2]}"
             f"<br>P@{k} %{{y:.1f}} ± %{{customdata[3]:.1f}}<br>S@{k} %{{x:.1f}} ± %{{customdata[4]:.1f}}"
             "<extra></extra>")
    for name, group in groups.items():
        ref = name == "reference"
        fig.add_trace(go.Scatter(
            x=[p["similarity"] for p in group], y=[p["polarity"] for p in group], mode="markers",
            name=plot_text(name),
            error_x={"type": "data", "array": [p.get("similarity_sd", 0.0) for p in group], "thickness": 1},
            error_y={"type": "data", "array": [p.get("polarity_sd", 0.0) for p in group], "thickness": 1},
            marker={"symbol": "star" if ref else "circle", "size": 16 if ref else 9,
                    **({"color": "black"} if ref else {})},
            customdata=[[plot_text(p.get("name", "")), plot_text(p.get("recipe") or "–"),
                         _margin_text(p.get("margin")), p.get("polarity_sd", 0.0), p.get("similarity_sd", 0.0)]
                        for p in group],
            hovertemplate=hover,
        ))
    if points:
        front = [points[i] for i in pareto_front([(p["polarity"], p["similarity"]) for p in points])]
        fig.add_trace(go.Scatter(
            x=[p["similarity"] for p in front], y=[p["polarity"] for p in front], mode="lines",
            name="Pareto front", line={"dash": "dash", "color": "grey"}, hoverinfo="skip",
        ))
    fig.update_layout(title=f"Retrieval trade-off: polarity P@{k} vs semantic similarity S@{k}",
                      hovermode="closest", legend_title_text="recipe")
    fig.update_xaxes(title_text=f"S@{k}: semantic similarity (reference cosine × 100)")
    fig.update_yaxes(title_text=f"P@{k}: polarity (same-label share × 100)")
    return fig


def sts_change_figure(rows: list[dict]) -> go.Figure:
    """One line per run from its STS Spearman before training (grey) to after (coloured by better / worse), so
    the direction and size of each change read at a glance; rows as
    core.analysis.tradeoff.metric_changes(store, "sts_spearman") gives."""
    fig = go.Figure()
    names = [plot_text(r["run_id"]) for r in rows]
    for r, name in zip(rows, names):
        fig.add_trace(go.Scatter(x=[r["before"], r["after"]], y=[name, name], mode="lines", showlegend=False,
                                 line={"color": "lightgrey", "width": 3}, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[r["before"] for r in rows], y=names, mode="markers", name="before",
                             marker={"color": "grey", "size": 10},
                             hovertemplate="%{y}: before %{x:.1f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[r["after"] for r in rows], y=names, mode="markers", name="after",
                             marker={"color": ["#2b8a3e" if r["change"] >= 0 else "#c92a2a" for r in rows], "size": 12},
                             customdata=[[plot_text(r["name"]), r["change"]] for r in rows],
                             hovertemplate="%{customdata[0]}<br>after %{x:.1f} (%{customdata[1]:+.1f})<extra></extra>"))
    fig.update_layout(title="STS Spearman before → after training", height=120 + 40 * len(rows),
                      legend={"orientation": "h", "y": -0.2})
    fig.update_xaxes(title_text="STS Spearman (cosine vs gold score × 100)")
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def _token_axis(tokens: Sequence[str]) -> dict:
    """Tokens repeat ("the", "."), which a categorical axis would merge; use positions with token ticks."""
    return {"tickmode": "array", "tickvals": list(range(len(tokens))),
            "ticktext": [plot_text(t) for t in tokens], "tickfont": {"size": 9}}


def attention_heatmaps(attn: np.ndarray, tokens: Sequence[str], title: str, cols: int = 4) -> go.Figure:
    """Every head's map (query rows attend to key columns) and the head-summed map, tiled into one figure.

    The tiles share one pair of axes instead of a subplot each: a browser draws 13 heatmap subplots about
    eight times slower than one heatmap, and the Attention page shows two such grids. Head maps form one
    trace on a 0-1 scale; the summed map (0 to the number of heads) is a second trace with its own scale.
    """
    attn = np.asarray(attn, dtype=np.float32)
    heads, s, _ = attn.shape
    if s != len(tokens):
        raise ValueError(f"attention is {s} x {s} but there are {len(tokens)} tokens")
    panels = [*attn, attn.sum(0)]
    names = [f"head {h + 1}" for h in range(heads)] + ["sum over heads"]
    cols = min(cols, len(panels))
    rows = math.ceil(len(panels) / cols)
    step = s + max(1, round(0.2 * s))  # tile plus the gap before the next one
    shape = (rows * step - (step - s), cols * step - (step - s))
    z_heads, z_sum = np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)
    text = np.full(shape, "", dtype=object)
    safe = [plot_text(t) for t in tokens]
    pair = np.array([[f"{safe[q]} → {safe[t]}" for t in range(s)] for q in range(s)], dtype=object)
    annotations = []
    for i, (panel, name) in enumerate(zip(panels, names)):
        r, c = divmod(i, cols)
        tile = (slice(r * step, r * step + s), slice(c * step, c * step + s))
        (z_sum if i == heads else z_heads)[tile] = panel
        text[tile] = name + "<br>" + pair
        annotations.append({"x": c * step + (s - 1) / 2, "y": r * step - 0.6, "text": name, "showarrow": False,
                            "yanchor": "bottom", "font": {"size": 11}})
    hover = "%{text}<br>%{z:.3f}<extra></extra>"
    fig = go.Figure([
        go.Heatmap(z=z_heads, text=text, name="heads", coloraxis="coloraxis", hoverongaps=False,
                   hovertemplate=hover),
        go.Heatmap(z=z_sum, text=text, name="sum over heads", coloraxis="coloraxis2", hoverongaps=False,
                   hovertemplate=hover),
    ])

    # Query tokens label every tile row (9 px a token keeps them legible, up to a cap); key tokens would need
    # more width than a tile has, so they show on hover and on zoom.
    fig.update_xaxes(title_text="key token (hover or zoom in for names)", showticklabels=False, showgrid=False,
                     zeroline=False)
    fig.update_yaxes(title_text="query token", autorange="reversed", tickmode="array", showgrid=False,
                     zeroline=False, tickvals=[r * step + t for r in range(rows) for t in range(s)],
                     ticktext=safe * rows, tickfont={"size": 8})
    fig.update_layout(
        title=title, height=130 + rows * min(240, max(120, 9 * s + 30)), annotations=annotations,
        plot_bgcolor="white", margin={"t": 80},
        coloraxis={"colorscale": "Blues", "cmin": 0.0, "cmax": 1.0,
                   "colorbar": {"title": {"text": "attention"}, "thickness": 10, "len": 0.6}},
        coloraxis2={"colorscale": "Oranges", "showscale": False},
    )
    return fig


def token_weight_bars(tokens: Sequence[str], weights_ref: Sequence[float],
                      weights_tuned: Sequence[float]) -> go.Figure:
    """ATA token weights (docs/definitions.md, ATA pooling), reference vs fine-tuned side by side per token."""
    if not len(tokens) == len(weights_ref) == len(weights_tuned):
        raise ValueError("tokens and both weight lists must have the same length")
    x = list(range(len(tokens)))
    safe = [plot_text(t) for t in tokens]
    fig = go.Figure()
    for name, weights in (("reference", weights_ref), ("fine-tuned", weights_tuned)):
        fig.add_trace(go.Bar(x=x, y=list(weights), name=name, customdata=safe,
                             hovertemplate=f"{name}<br>%{{customdata}}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title="ATA token weights", barmode="group", legend_title_text="model")
    fig.update_xaxes(title_text="token", **_token_axis(tokens))
    fig.update_yaxes(title_text="weight (sums to 1)")
    return fig


def loss_curve_figure(losses: list[dict], evals: list[dict] | None = None,
                      phases: list[dict] | None = None) -> go.Figure:
    """Training loss by step; evaluation points (P@k, S@k, accuracies, all in %) on a second y axis; `phases`
    ([{"step", "label"}], e.g. a curriculum's bands, steps 0-based) as labelled dotted lines where each begins, so a
    jump in the loss can be read against the change that caused it. A loss is logged under the step count after
    its step, so the phase starting at 0-based step s covers logged points s + 1 onward: its line sits at s + 0.5,
    between the last point of the previous phase and its own first."""
    series = [m for m in HEADLINE if any(m.key in e for e in evals or [])]
    fig = make_subplots(specs=[[{"secondary_y": bool(series)}]])
    fig.add_trace(go.Scatter(
        x=[p["step"] for p in losses], y=[p["loss"] for p in losses], mode="lines", name="training loss",
        hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>",
    ), secondary_y=False)
    for metric in series:
        name = metric.short.format(k="k")
        pts = [e for e in evals if metric.key in e]
        fig.add_trace(go.Scatter(
            x=[e["step"] for e in pts], y=[metric.shown(e[metric.key]) for e in pts], mode="lines+markers", name=name,
            hovertemplate=f"step %{{x}}<br>{name} %{{y:.1f}}%<extra></extra>",
        ), secondary_y=True)
    for phase in phases or []:
        fig.add_vline(x=phase["step"] + 0.5, line_dash="dot", line_color="grey", line_width=1,
                      annotation_text=plot_text(phase["label"]), annotation_position="top right")
    fig.update_layout(title="Training progress", hovermode="x unified")
    last = max([p["step"] for p in losses] + [e["step"] for e in evals or []] + [1])
    fig.update_xaxes(title_text="step", dtick=max(1, round(last / 10)))  # whole steps, also on short runs
    fig.update_yaxes(title_text="loss", secondary_y=False)
    if series:
        fig.update_yaxes(title_text="score (%)", secondary_y=True)
    return fig


def losses_figure(curves: dict[str, list[dict]]) -> go.Figure:
    """Training losses of several runs on one plot, one line per run id (curves: id -> the run's losses)."""
    fig = go.Figure()
    for name, losses in curves.items():
        fig.add_trace(go.Scatter(x=[p["step"] for p in losses], y=[p["loss"] for p in losses], mode="lines",
                                 name=name))
    fig.update_layout(title="Training loss", hovermode="x unified", legend_title_text="run")
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="loss")
    return fig
