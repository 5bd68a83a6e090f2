"""Plotly figure builders for the pages: pure functions returning go.Figure, no Streamlit.

Plotly reads a subset of HTML (<b>, <a>, <br>, ...) in every string it draws (legend names, tick labels, hover
labels, annotations), so every user string (texts, class labels, tokens, run and recipe names) goes through
`plot_text` here, and hover templates name a trace's label by reference (%{fullData.name}), never by value.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Collection, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative, sample_colorscale
from plotly.subplots import make_subplots

from core.evaluation.headline import HEADLINE
from core.evaluation.pareto import pareto_front
from core.evaluation.published import Published, beside
from core.evaluation.uncertainty import ERROR_BARS, interval, proportion_ci

PUBLISHED_COLOUR = "#7048e8"  # a published figure (core.evaluation.published): one colour, no run's
PUBLISHED_NOTE_CHARS = 40  # of its source note in a line's label; the whole note is in the hover where there is one
# Tableau's ten first, whose neighbours in sorted label order stay far apart (anger blue, love red); Plotly's put
# anger and love in blue and violet.
PALETTE = qualitative.D3 + qualitative.Plotly + qualitative.Alphabet
WEBGL_ABOVE = 3000  # SVG scatter gets sluggish beyond a few thousand points
HOVER_CHARS = 200
# A map's continuous colour (e.g. neighbourhood change): grey for none, then yellow to dark red, darker for more.
CHANGE_SCALE = [[0.0, "#c9ccd1"], [0.1, "#fed976"], [0.4, "#fd8d3c"], [0.7, "#e31a1c"], [1.0, "#800026"]]
# Marker shapes that SVG and WebGL scatters both draw, one per label where colour shows a value instead.
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x", "triangle-down", "star", "pentagon",
           "hexagon", "triangle-left", "triangle-right")


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
    *,
    colour_by: Sequence[str] | None = None,
    colour_title: str = "label",
    values: Sequence[float] | None = None,
    values_title: str = "",
    details: Sequence[str] | None = None,
    arrows: tuple[np.ndarray, Sequence[int]] | None = None,
    selected: Collection[int] | None = None,
    colours: dict[str, str] | None = None,
) -> go.Figure:
    """One scatter trace per group of `colour_by` (default the labels; the legend lists the groups under
    `colour_title`), or, given `values` in [0, 1], one per label with every point coloured by its value on one colour
    bar (`values_title`) fixed to [0, 1], so two maps with the same values read alike. customdata[0] is the row in
    `coords`, so a page can map a selected point back to its text; `details[i]` is added to point i's hover.

    `highlight` rings one point (e.g. the picked one). `arrows` (starts (m, 2), rows (m,)) draws an arrow from each
    start to its row's point, in one trace of its own the legend can hide. `selected` rows are drawn selected and the
    others dimmed (plotly's selectedpoints), so a selection the page keeps shows again after the chart is redrawn.
    `colours` fixes a colour per `colour_by` group where the groups mean something (kNN flips), drawn in its order,
    the first below the rest; else each group takes the palette's colour by its sorted place (label_colours).
    `title` is plotly markup (it may hold <sup>): a user string in it is the caller's to pass through plot_text."""
    coords = np.asarray(coords)
    labels = [str(lab) for lab in labels]
    groups = labels if values is not None or colour_by is None else [str(g) for g in colour_by]
    if not len(coords) == len(labels) == len(texts) == len(groups) == len(details if details is not None else texts) \
            == len(values if values is not None else texts):
        raise ValueError("coords, labels, texts and any colour_by, values or details must have the same length")
    scatter = go.Scattergl if len(coords) > WEBGL_ABOVE else go.Scatter
    extra = ["" if details is None else " · " + plot_text(details[i]) for i in range(len(coords))]
    template = "<b>%{fullData.name}</b> · #%{customdata[0]}%{customdata[2]}<br>%{customdata[1]}<extra></extra>"
    picked = None if not selected else set(selected)
    fig = go.Figure()
    present = set(groups)
    by_group = label_colours(groups) if colours is None else {g: c for g, c in colours.items() if g in present}
    for n, (group, colour) in enumerate(by_group.items()):
        rows = [i for i, x in enumerate(groups) if x == group]
        marker = {"color": colour, "size": 6, "opacity": 0.8}
        if values is not None:  # colour tells the value, so a label is told by its marker's shape
            marker.update(color=np.asarray(values, dtype=float)[rows], coloraxis="coloraxis",
                          symbol=SYMBOLS[n % len(SYMBOLS)])
        fig.add_trace(scatter(
            x=coords[rows, 0], y=coords[rows, 1], mode="markers", name=plot_text(group), marker=marker,
            customdata=[[i, hover_text(texts[i]), extra[i]] for i in rows], hovertemplate=template,
            selectedpoints=None if picked is None else [j for j, i in enumerate(rows) if i in picked],
        ))
    if arrows is not None and len(arrows[1]):
        starts, ends = np.asarray(arrows[0], dtype=float), coords[np.asarray(arrows[1], dtype=int)]
        gap = np.full(len(ends), np.nan)
        fig.add_trace(go.Scatter(  # SVG even above WEBGL_ABOVE: WebGL markers cannot point along a line
            x=np.column_stack([starts[:, 0], ends[:, 0], gap]).ravel(),
            y=np.column_stack([starts[:, 1], ends[:, 1], gap]).ravel(),
            mode="lines+markers", name=f"moved most ({len(ends)})", hoverinfo="skip", connectgaps=False,
            line={"color": "rgba(33, 37, 41, 0.55)", "width": 1.2},
            marker={"symbol": "arrow", "angleref": "previous", "size": [0, 9, 0] * len(ends),
                    "color": "rgba(33, 37, 41, 0.8)"},
        ))
    if highlight is not None:
        fig.add_trace(go.Scatter(
            x=[coords[highlight, 0]], y=[coords[highlight, 1]], mode="markers", name="picked",
            marker={"symbol": "circle-open", "size": 16, "color": "black", "line": {"width": 2}},
            customdata=[[highlight, hover_text(texts[highlight]), extra[highlight]]], hovertemplate=template,
        ))
    # The legend goes below the map, so the map takes the page's width (half of it each, side by side); at the
    # right it took a third of a half-width map with a corpus of a few classes.
    fig.update_layout(title=title, legend_title_text=plot_text(colour_title) if values is None else "label",
                      hovermode="closest", legend={"orientation": "h", "yanchor": "top", "y": -0.12, "xanchor": "left",
                                                   "x": 0})
    if values is not None:  # the colour bar stays at the right
        fig.update_layout(coloraxis={"colorscale": CHANGE_SCALE, "cmin": 0, "cmax": 1, "colorbar": {
            "title": {"text": values_title, "side": "right"}, "tickformat": ".0%", "thickness": 12}})
    # No fixed aspect ratio: a map's axes have no unit, and a square map took about half of a 430 px panel.
    fig.update_xaxes(title_text=f"{method} 1", showticklabels=False, zeroline=False)
    fig.update_yaxes(title_text=f"{method} 2", showticklabels=False, zeroline=False)
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
    n_texts: int | None = None,
) -> go.Figure:
    """kNN accuracy per layer (0 = embeddings), one line per model/run; frozen layers shaded, since
    their curve can only move through what happens below them. With `n_texts` (the test texts voted on), each point
    has its 95% interval (Wilson) as an error bar and in its hover."""
    fig = go.Figure()
    for name, accs in curves.items():
        bounds = [proportion_ci(a, n_texts) for a in accs] if n_texts else []
        fig.add_trace(go.Scatter(
            x=list(range(len(accs))), y=accs, mode="lines+markers", name=plot_text(name),
            error_y=dict(type="data", symmetric=False, array=[high - a for a, (_, high) in zip(accs, bounds)],
                         arrayminus=[a - low for a, (low, _) in zip(accs, bounds)], thickness=1, width=3)
            if bounds else None,
            customdata=[[low, high] for low, high in bounds] or None,
            hovertemplate="%{fullData.name}<br>layer %{x}: %{y:.3f}"
                          + (" [%{customdata[0]:.3f}–%{customdata[1]:.3f}]" if bounds else "") + "<extra></extra>",
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


_BUDGET_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "pentagon", "hexagon", "triangle-down", "cross")
# Where a point's label may go, in order of preference: the diagonals first, clear of both error bars.
_LABEL_PLACES = ("top right", "bottom right", "top left", "bottom left", "middle right", "middle left", "top center",
                 "bottom center")
_PLOT_PX = (760.0, 330.0)  # the trade-off plot's drawing area at the app's 1280 px width, where labels are measured
_CHAR_PX, _LINE_PX, _GAP_PX, _MARKER_PX = 6.2, 14.0, 5.0, 6.0  # an 11 px label's character and line, its offset


def _overlap(a: tuple, b: tuple) -> float:
    """Area shared by two (left, bottom, right, top) boxes."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _label_positions(xy: np.ndarray, extent: np.ndarray, labels: list[str]) -> list[str]:
    """Where each point's label goes: the first of _LABEL_PLACES whose box, measured in pixels at the app's width,
    covers no label placed before it, no other marker and nothing outside the plot, else the place that covers
    least; so labels of crowded (or coincident) points do not print over each other. `extent` is the axes' (low,
    high) per axis, error bars included, as plotly's autorange sees them."""
    low, high = extent[:, 0], extent[:, 1]
    scale = np.array(_PLOT_PX) / np.where(high > low, high - low, 1.0)
    px = np.where(np.isfinite(xy), (xy - low) * scale, np.nan)
    markers = [(x - _MARKER_PX, y - _MARKER_PX, x + _MARKER_PX, y + _MARKER_PX) for x, y in px]
    placed: list[tuple] = []
    positions = []
    for i, ((x, y), label) in enumerate(zip(px, labels)):
        if not np.isfinite([x, y]).all():
            positions.append(_LABEL_PLACES[0])
            continue
        width = len(label) * _CHAR_PX

        def box(place: str) -> tuple:
            vertical, horizontal = place.split()
            left = {"right": x + _GAP_PX, "left": x - _GAP_PX - width, "center": x - width / 2}[horizontal]
            bottom = {"top": y + _GAP_PX, "bottom": y - _GAP_PX - _LINE_PX, "middle": y - _LINE_PX / 2}[vertical]
            return left, bottom, left + width, bottom + _LINE_PX

        def cost(place: str) -> float:
            b = box(place)
            outside = (b[2] - b[0]) * (b[3] - b[1]) - _overlap(b, (0.0, -np.inf, _PLOT_PX[0], np.inf))
            return (outside + sum(_overlap(b, other) for other in placed)
                    + sum(_overlap(b, m) for j, m in enumerate(markers) if j != i and np.isfinite(m).all()))

        best = min(_LABEL_PLACES, key=cost)  # min keeps the first of equal costs: the preferred place
        placed.append(box(best))
        positions.append(best)
    return positions


def _bar(point: dict, metric: str, bars: str) -> tuple[float, float, str]:
    """(below, above, hover text) of a point's error bar: the seeds' min–max for a mean over seeds, else the run's
    own interval as `bars` asks (core.evaluation.uncertainty.interval)."""
    mean = point[metric]
    if point.get("n_seeds", 1) > 1:
        low, high = point["seed_range"][metric]
        what = f"seeds' min–max {low:.1f}–{high:.1f} (sd {point['seed_sd'][metric]:.1f})"
    else:
        low, high, approximate = interval(point, metric, bars)
        half = (high - low) / 2
        what = ("n/a" if math.isnan(half) else f"{bars.upper()} ± {half:.1f}" if bars != "ci" else
                f"95% CI {low:.1f}–{high:.1f}" + (" (normal approx.: evaluated before intervals were kept)"
                                                  if approximate else ""))
    return mean - low, high - mean, f"{mean:.1f} · {what}"


def _count_text(point: dict) -> str:
    if point.get("n_seeds", 1) > 1:
        return f"mean of {point['n_seeds']} runs, seeds {', '.join(str(s) for s in point['seeds'])}"
    n = point.get("n_queries")
    return f"{n:,} targets" if n else ""


def tradeoff_figure(points: list[dict], k: int = 16, bars: str = "ci",
                    published: dict[str, Published] | None = None, discount: str = "linear") -> go.Figure:
    """S@k (x) vs P@k (y): the reference as a black star, one point per run, or per set of runs that differ only in
    their seed (core.analysis.tradeoff.seed_groups: their mean, bars the seeds' min–max), each labelled with recipe
    and knob (quick points say so); colour per recipe, marker per budget; error bars as `bars`
    (core.evaluation.uncertainty.ERROR_BARS); the Pareto front (over all points) as a dashed line. The corpus's
    `published` figures (core.evaluation.published): P@k and S@k both as a "published" point of its own, one of
    them alone as a dashed line across the plot; not part of the front; one measured at another k or rank discount
    than the points' (`k`, `discount`) says so in its hover or label (core.evaluation.published.beside)."""
    fig = go.Figure()
    recipes = list(dict.fromkeys(str(p.get("recipe") or "run") for p in points if not p.get("is_reference")))
    budgets = list(dict.fromkeys(p.get("budget") for p in points if not p.get("is_reference")))
    bar_of = [(_bar(p, "similarity", bars), _bar(p, "polarity", bars)) for p in points]
    xy = np.array([[p["similarity"], p["polarity"]] for p in points], dtype=np.float64).reshape(-1, 2)
    reach = np.array([[[x - xb[0], x + xb[1]], [y - yb[0], y + yb[1]]]
                      for (x, y), (xb, yb) in zip(xy, bar_of)]).reshape(-1, 2, 2)  # point, axis, (low, high)
    reach = np.where(np.isfinite(reach), reach, xy[:, :, None])  # a missing bar reaches no further than its point
    extent = (np.stack([np.nanmin(reach[:, :, 0], axis=0), np.nanmax(reach[:, :, 1], axis=0)], axis=1)
              if np.isfinite(xy).any() else np.zeros((2, 2)))
    positions = _label_positions(xy, extent, [p.get("label") or p.get("name", "") for p in points])
    traces: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        key = ("reference",) if p.get("is_reference") else (str(p.get("recipe") or "run"), p.get("budget"),
                                                            p.get("n_seeds", 1) > 1)
        traces.setdefault(key, []).append(i)
    hover = ("<b>%{customdata[3]}</b> · %{customdata[0]}<br>recipe %{customdata[1]}, margin %{customdata[2]}, "
             f"%{{customdata[4]}}<br>P@{k} %{{customdata[5]}}<br>S@{k} %{{customdata[6]}}<br>%{{customdata[7]}}"
             "<extra></extra>")
    for key, rows in traces.items():
        group = [points[i] for i in rows]
        ref, seeded = key == ("reference",), len(key) == 3 and key[2]
        x_bars, y_bars = [bar_of[i][0] for i in rows], [bar_of[i][1] for i in rows]
        colour = "black" if ref else PALETTE[recipes.index(key[0]) % len(PALETTE)]
        symbol = "star" if ref else _BUDGET_SYMBOLS[budgets.index(key[1]) % len(_BUDGET_SYMBOLS)]
        name = "reference" if ref else key[0] + (f" · {key[1]}" if key[1] else "") + (
            " · mean of seeds (bars: min–max)" if seeded else "")
        bar_style = {"type": "data", "symmetric": False, "thickness": 2.5 if seeded else 1, "width": 7 if seeded else 3,
                     "color": colour}
        fig.add_trace(go.Scatter(
            x=[p["similarity"] for p in group], y=[p["polarity"] for p in group], mode="markers+text",
            name=plot_text(name), text=[plot_text(p.get("label") or p.get("name", "")) for p in group],
            textposition=[positions[i] for i in rows], textfont={"size": 11}, cliponaxis=False,
            error_x={**bar_style, "array": [b[1] for b in x_bars], "arrayminus": [b[0] for b in x_bars]},
            error_y={**bar_style, "array": [b[1] for b in y_bars], "arrayminus": [b[0] for b in y_bars]},
            marker={"symbol": symbol, "size": 16 if ref else 12 if seeded else 9, "color": colour,
                    **({"line": {"width": 1.5, "color": "white"}} if seeded else {})},
            customdata=[[plot_text(p.get("name", "")), plot_text(p.get("recipe") or "–"),
                         _margin_text(p.get("margin")), plot_text(p.get("label") or ""),
                         plot_text(p.get("budget") or "untrained"), yb[2], xb[2], _count_text(p)]
                        for p, yb, xb in zip(group, y_bars, x_bars)],
            hovertemplate=hover, hoverlabel={"align": "left"},
        ))
    if points:
        front = [points[i] for i in pareto_front([(p["polarity"], p["similarity"]) for p in points])]
        fig.add_trace(go.Scatter(
            x=[p["similarity"] for p in front], y=[p["polarity"] for p in front], mode="lines",
            name="Pareto front", line={"dash": "dash", "color": "grey"}, hoverinfo="skip",
        ))
    _published_marks(fig, published or {}, k, discount)
    seeds_note = "; a mean of seeds: the seeds' min–max" if any(p.get("n_seeds", 1) > 1 for p in points) else ""
    fig.update_layout(title=f"Retrieval trade-off: polarity P@{k} vs semantic similarity S@{k}<br><sup>error bars: "
                            f"{ERROR_BARS[bars]}{seeds_note}</sup>",
                      hovermode="closest", height=560, legend={"orientation": "h", "yanchor": "top", "y": -0.14},
                      legend_title_text="recipe · budget")
    fig.update_xaxes(title_text=f"S@{k}: semantic similarity (reference cosine × 100)")
    fig.update_yaxes(title_text=f"P@{k}: polarity (same-label share × 100)")
    return fig


def _published_label(figure: Published, caveat: str | None = None) -> str:
    """"published STS Spearman 77.6 (Reimers 2019)" for a line's label, its note cut to PUBLISHED_NOTE_CHARS; a
    `caveat` (core.evaluation.published.beside) on a second line."""
    note = figure.note if len(figure.note) <= PUBLISHED_NOTE_CHARS else figure.note[:PUBLISHED_NOTE_CHARS - 1] + "…"
    return plot_text(f"published {figure.name} {figure.text()}" + (f" ({note})" if note else "")) + (
        f"<br>{plot_text(caveat)}" if caveat else "")


def _published_marks(fig: go.Figure, published: dict[str, Published], k: int, discount: str) -> None:
    """A published P@k and S@k as one point marked "published", its hover naming each one's caveat against the
    points' `k` and `discount`; one of them alone as a dashed line at its value, its label naming it."""
    polarity, similarity = published.get("polarity"), published.get("similarity")
    if polarity is not None and similarity is not None:
        notes = " · ".join(dict.fromkeys(f.note for f in (polarity, similarity) if f.note))
        caveats = [f"{f.name}: {caveat}" for f in (polarity, similarity) if (caveat := beside(f, k, discount))]
        fig.add_trace(go.Scatter(
            x=[similarity.value], y=[polarity.value], mode="markers", name="published",  # named in the legend only
            marker={"symbol": "x", "size": 13, "color": PUBLISHED_COLOUR, "line": {"width": 1, "color": "white"}},
            customdata=[["<br>".join(hover_text(line) for line in [notes or "no source given", *caveats])]],
            hovertemplate=f"<b>published</b> on this test set<br>{plot_text(polarity.name)} %{{y:.1f}} · "
                          f"{plot_text(similarity.name)} %{{x:.1f}}<br>%{{customdata[0]}}<extra></extra>"))
    elif polarity is not None:
        _published_line(fig, polarity, "y", beside(polarity, k, discount))
    elif similarity is not None:
        _published_line(fig, similarity, "x", beside(similarity, k, discount))


def _published_line(fig: go.Figure, figure: Published, axis: str, caveat: str | None = None) -> None:
    """A published figure as a dashed line at its value across the plot (`axis` "x": vertical), labelled in the
    legend, where a label never covers a point (inside the plot, one did)."""
    style = {"dash": "dash", "color": PUBLISHED_COLOUR, "width": 1.5}
    if axis == "x":
        fig.add_vline(x=figure.value, line=style)
    else:
        fig.add_hline(y=figure.value, line=style)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=style, name=_published_label(figure, caveat),
                             hoverinfo="skip"))


def _interval_bars(rows: list[dict], when: str) -> dict:
    """Horizontal error bars of each row's `when` ("before" / "after") figure at its 95% interval (row[when + "_ci"];
    none drawn where a row has none)."""
    bounds = [r.get(f"{when}_ci") or (r[when], r[when]) for r in rows]
    return {"type": "data", "symmetric": False, "color": "darkgrey", "thickness": 1.5,
            "array": [high - r[when] for r, (_, high) in zip(rows, bounds)],
            "arrayminus": [r[when] - low for r, (low, _) in zip(rows, bounds)]}


STS_PLOT_PX, STS_ROW_PX = 40, 45  # the STS chart's plot area: padding, then each run's row
STS_MARGIN_PX = {"t": 60, "b": 130}  # the title above; tick labels, axis title and the legend below
STS_LEGEND_PX = 75  # from the plot's bottom edge to the legend's top: under the axis title
STS_MIN_SPAN = 1.0  # the STS axis spans at least a point of Spearman x 100, so its ticks fall on round steps


def sts_change_figure(rows: list[dict], published: Sequence[Published] = ()) -> go.Figure:
    """One line per run from its STS Spearman before training (grey) to after (coloured by better / worse), so
    the direction and size of each change read at a glance; rows as
    core.analysis.tradeoff.metric_changes(store, "sts_spearman") gives. Each `published` STS Spearman of the runs'
    corpora (core.analysis.tradeoff.published_for) as a dashed vertical line, its value and source in the legend."""
    fig = go.Figure()
    names = [plot_text(r.get("name") or r["run_id"]) for r in rows]  # the run's label: what tells it apart, its id
    for r, name in zip(rows, names):
        fig.add_trace(go.Scatter(x=[r["before"], r["after"]], y=[name, name], mode="lines", showlegend=False,
                                 line={"color": "lightgrey", "width": 3}, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[r["before"] for r in rows], y=names, mode="markers", name="before",
                             marker={"color": "grey", "size": 10}, error_x=_interval_bars(rows, "before"),
                             hovertemplate="%{y}: before %{x:.1f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[r["after"] for r in rows], y=names, mode="markers", name="after",
                             error_x=_interval_bars(rows, "after"),
                             marker={"color": ["#2b8a3e" if r["change"] >= 0 else "#c92a2a" for r in rows], "size": 12},
                             customdata=[[plot_text(r["name"]), r["change"]] for r in rows],
                             hovertemplate="%{customdata[0]}<br>after %{x:.1f} (%{customdata[1]:+.1f})<extra></extra>"))
    for figure in published:
        _published_line(fig, figure, "x")
    # The legend below the axis title, placed in pixels (paper units scale with the plot's height): at a fixed -0.2 it
    # sat on the tick labels, and at 40 px a row the plot area of two runs was too short to label both rows.
    plot_px = STS_PLOT_PX + STS_ROW_PX * len(rows)
    fig.update_layout(title="STS Spearman before → after training", height=plot_px + STS_MARGIN_PX["t"] +
                      STS_MARGIN_PX["b"], margin=STS_MARGIN_PX,
                      legend={"orientation": "h", "yanchor": "top", "y": -STS_LEGEND_PX / plot_px, "x": 0})
    values = [v for r in rows for v in (r["before"], r["after"], *(r.get("before_ci") or ()),
                                         *(r.get("after_ci") or ()))] + [f.value for f in published]
    low, high = min(values, default=0.0), max(values, default=0.0)
    pad = max(STS_MIN_SPAN / 2, 0.1 * (high - low))  # a span of a point or more: ticks at 0.2 or 0.5, not 77.225
    fig.update_xaxes(title_text="STS Spearman (cosine vs gold score × 100)", range=[low - pad, high + pad],
                     tickformat=".1f")
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


TOKEN_LABELS = 30  # token tick labels per axis at most: about 11 px each in a map half the page wide at 1280 px
# A colour bar under the plot, in pixels from the figure's bottom edge: beside it, it would take a map's width.
_BAR_BELOW = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "lenmode": "pixels", "len": 200,
              "thickness": 10}


def _sqrt_scale(name: str, steps: int = 11) -> list[list]:
    """Plotly colour scale `name` on a square-root scale: attention is mostly small (about 1 / S) beside a few large
    values, which on a linear scale leave every long text's map blank. The colour bar still reads in values."""
    at = np.linspace(0.0, 1.0, steps)
    return [[float(v), colour] for v, colour in zip(at, sample_colorscale(name, list(np.sqrt(at))))]


def _scale_top(values: np.ndarray, top: float | None) -> float | None:
    """A colour scale's top: `top` if given, else the largest finite value; None (plotly's own) when not finite."""
    top = float(np.nanmax(values, initial=0.0)) if top is None else float(top)
    return top if math.isfinite(top) and top > 0 else None


def _token_axis(tokens: Sequence[str], title: str, limit: int = TOKEN_LABELS) -> dict:
    """Axis settings naming tokens by position (tokens repeat, "the" and ".", which a categorical axis would merge):
    every token up to `limit`, else every k-th, and a title saying how many are labelled."""
    every = max(1, math.ceil(len(tokens) / limit))
    shown = range(0, len(tokens), every)
    count = f"all {len(tokens)}" if every == 1 else f"{len(shown)} of {len(tokens)} labelled, hover for all"
    return {"title_text": f"{title} ({count})", "tickmode": "array", "tickvals": list(shown),
            "ticktext": [plot_text(tokens[i]) for i in shown], "tickfont": {"size": 9}, "showgrid": False,
            "zeroline": False}


def attention_head_grid(attn: np.ndarray, title: str, zmax: float | None = None, selected: int | None = None,
                        cols: int = 4) -> go.Figure:
    """One layer's heads (heads, S, S) as small multiples on one colour scale from 0 to `zmax` (default: the
    largest value), numbered, the `selected` head (0-based) outlined.

    Each head is its own heatmap trace on one shared pair of axes, which a browser draws several times faster than
    a subplot per head. Plotly selects points of scatter-like traces only, never heatmap cells, so an invisible
    lattice of points carrying their head (customdata) covers every tile: a click anywhere on a tile selects one.
    Token names are left to the enlarged head's map (attention_token_map): per-cell labels for every tile would
    weigh megabytes.
    """
    attn = np.asarray(attn, dtype=np.float32)
    if attn.ndim != 3 or attn.shape[1] != attn.shape[2] or not attn.shape[0]:
        raise ValueError(f"attention must be (heads, S, S), not {attn.shape}")
    heads, s, _ = attn.shape
    cols = min(cols, heads)
    rows = math.ceil(heads / cols)
    # Gaps in cells, so in pixels they stay the same for any S: a thin one between columns, room for a label above.
    across_step, down_step = s + max(1, round(0.1 * s)), s + max(1, round(0.3 * s))
    tiles = [divmod(h, cols) for h in range(heads)]
    fig = go.Figure()
    for h, (r, c) in enumerate(tiles):
        fig.add_trace(go.Heatmap(z=attn[h], x0=c * across_step, dx=1, y0=r * down_step, dy=1, name=f"head {h + 1}",
                                 coloraxis="coloraxis", hoverinfo="skip"))
        fig.add_annotation(x=c * across_step + (s - 1) / 2, y=r * down_step - 0.5, showarrow=False, yanchor="bottom",
                           text=f"<b>head {h + 1}</b>" if h == selected else f"head {h + 1}", font={"size": 10})
    ticks = np.linspace(0, s - 1, min(s, 8))  # about every 11 px of a tile at the page's width: under any click
    across, down = (a.ravel() for a in np.meshgrid(ticks, ticks))
    fig.add_trace(go.Scatter(
        x=np.concatenate([across + c * across_step for _, c in tiles]),
        y=np.concatenate([down + r * down_step for r, _ in tiles]),
        customdata=np.repeat(np.arange(1, heads + 1), across.size), mode="markers", name="heads", showlegend=False,
        marker={"opacity": 0, "size": 6}, selected={"marker": {"opacity": 0}}, unselected={"marker": {"opacity": 0}},
        hovertemplate="head %{customdata}: click to enlarge<extra></extra>"))
    if selected is not None and 0 <= selected < heads:
        r, c = tiles[selected]
        fig.add_shape(type="rect", x0=c * across_step - 0.5, x1=c * across_step + s - 0.5, y0=r * down_step - 0.5,
                      y1=r * down_step + s - 0.5, line={"color": "#c2255c", "width": 2})
    fig.update_xaxes(visible=False, range=[-0.5, (cols - 1) * across_step + s - 0.5], constrain="domain")
    fig.update_yaxes(visible=False, range=[(rows - 1) * down_step + s - 0.5, -0.5 - (down_step - s)],
                     scaleanchor="x", constrain="domain", constraintoward="top")
    fig.update_layout(title=title, height=130 + rows * 112, plot_bgcolor="white",
                      margin={"t": 50, "b": 60, "l": 10, "r": 10},
                      coloraxis={"colorscale": _sqrt_scale("Blues"), "cmin": 0.0,
                                 "cmax": _scale_top(attn, zmax),
                                 "colorbar": {**_BAR_BELOW, "title": {"text": "attention (all heads, one scale)",
                                                                      "side": "bottom"}}})
    return fig


def attention_token_map(z: np.ndarray, tokens: Sequence[str], title: str, scale: str, zmax: float | None = None,
                        colorscale: str = "Blues") -> go.Figure:
    """One S x S map (query rows attend to key columns) with the tokens on both axes, as the tokenizer gives them
    (thinned past TOKEN_LABELS), a colour bar titled `scale` from 0 to `zmax` (plotly colour scale `colorscale` on a
    square-root scale), and each cell's pair on hover."""
    z = np.asarray(z, dtype=np.float32)
    s = len(tokens)
    if z.shape != (s, s):
        raise ValueError(f"the map is {z.shape} but there are {s} tokens")
    safe = [f"#{i} {plot_text(t)}" for i, t in enumerate(tokens)]
    pairs = [[f"{safe[q]} → {safe[k]}" for k in range(s)] for q in range(s)]
    fig = go.Figure(go.Heatmap(
        z=z, text=pairs, colorscale=_sqrt_scale(colorscale), zmin=0.0, zmax=_scale_top(z, zmax),
        colorbar={**_BAR_BELOW, "title": {"text": scale, "side": "bottom"}},
        hovertemplate="%{text}<br>%{z:.3f}<extra></extra>"))
    fig.update_xaxes(tickangle=-90, **_token_axis(tokens, "key token"))
    fig.update_yaxes(autorange="reversed", **_token_axis(tokens, "query token"))
    fig.update_layout(title=title, height=560, margin={"t": 50, "b": 150, "r": 10}, plot_bgcolor="white")
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
    fig.update_layout(title="ATA token weights (last layer)", barmode="group", legend_title_text="model")
    fig.update_xaxes(**_token_axis(tokens, "token", limit=2 * TOKEN_LABELS))
    fig.update_yaxes(title_text="weight (sums to 1)")
    return fig


def loss_curve_figure(losses: list[dict], evals: list[dict] | None = None,
                      phases: list[dict] | None = None) -> go.Figure:
    """Training loss by step; evaluation points (P@k, S@k, accuracies, all in %) on a second y axis (a run's
    history: the before-evaluation at step 0, any in-training ones, the after-evaluation at the last step, so the
    curve spans the run; with no in-training one, the two are drawn as points without a line); `phases`
    ([{"step", "label"}], e.g. a curriculum's bands, steps 0-based) as labelled dotted lines where each begins, so a
    jump in the loss can be read against the change that caused it. A loss is logged under the step count after its
    step, so the phase starting at 0-based step s covers logged points s + 1 onward: its line sits at s + 0.5,
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
        fig.add_trace(go.Scatter(  # before and after alone are two points, not a learning curve: no line
            x=[e["step"] for e in pts], y=[metric.shown(e[metric.key]) for e in pts],
            mode="lines+markers" if len(pts) > 2 else "markers", name=name,
            hovertemplate=f"step %{{x}}<br>{name} %{{y:.1f}}%<extra></extra>",
        ), secondary_y=True)
    for phase in phases or []:
        fig.add_vline(x=phase["step"] + 0.5, line_dash="dot", line_color="grey", line_width=1,
                      annotation_text=plot_text(phase["label"]), annotation_position="top right")
    fig.update_layout(title="Training progress", hovermode="x unified")
    last = max([p["step"] for p in losses] + [e["step"] for e in evals or []] + [1])
    # Whole steps, also on short runs; the padded range keeps the end ticks off the axis ends, where Streamlit's
    # bundled Plotly drew no tick labels for two ticks and logged a "-Infinity" attribute error in the console.
    fig.update_xaxes(title_text="step", dtick=max(1, round(last / 10)), range=[-0.5, last + 0.5])
    fig.update_yaxes(title_text="loss", secondary_y=False)
    if series:  # ticks at the figures' own precision: the axis read 58.07 and 77.215 beside cards of 58.1 and 77.2
        fig.update_yaxes(title_text="score (%)", secondary_y=True,
                         tickformat=f".{max(metric.digits for metric in series)}f")
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
