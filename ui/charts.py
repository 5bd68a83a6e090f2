"""One way to show a figure on any page: the chart plus a download of it as interactive HTML."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st


def plot(fig: go.Figure, name: str, key: str, **chart: Any) -> None:
    """A Plotly chart with a button that downloads it as a self-contained HTML file named `name`.html (the
    chart's own toolbar offers PNG). `chart` goes to st.plotly_chart, e.g. on_select for clickable maps."""
    st.plotly_chart(fig, key=key, **chart)
    st.download_button("Download as HTML", data=lambda: fig.to_html(include_plotlyjs=True), file_name=f"{name}.html",
                       mime="text/html", key=f"{key}:html", on_click="ignore", icon=":material/download:",
                       type="tertiary")
