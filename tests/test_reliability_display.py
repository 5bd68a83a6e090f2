"""Issue 12, items 6 and 8: user strings are shown as typed, never as Markdown or HTML, and the server binds to this
machine and refuses a session under a foreign Host header (DNS rebinding).

Markdown bodies are rendered with markdown-it (CommonMark, raw HTML on, as a worst case of Streamlit's renderer);
plotly strings are decoded the way plotly.js decodes them (a subset of HTML tags, eight named entities, numeric ones).
"""

import functools
import html
import re
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.analysis.plots import (
    attention_token_map,
    hover_text,
    layer_curve_figure,
    map_figure,
    plot_text,
    sts_change_figure,
    token_weight_bars,
    tradeoff_figure,
)
from tests.conftest import paste_table
from ui.layout import escaped, literal

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ["[x](https:e.com)", "![b](a.png)", "<b>x<b>", "<img src=x onerror=alert(1)>", "**bold** _it_ `code`",
           'say "hi" & <go>', "a``b`", " $x^2$ ", ":red[x] :cat: :streamlit:", "# heading", "|a|b|"]


@functools.cache
def _markdown():
    """markdown-it (installed with rich); only the Markdown tests skip without it."""
    return pytest.importorskip("markdown_it").MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def rendered(body: str) -> tuple[str, set[str]]:
    """(the text a reader sees, the HTML tags the Markdown produced)."""
    out = _markdown().render(body)
    return html.unescape(re.sub(r"<[^>]+>", "", out)).strip(), set(re.findall(r"<([a-z][a-z0-9]*)", out))


PLOTLY_ENTITIES = {"mu": "μ", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "×", "plusmn": "±",
                   "deg": "°"}


def plotly_shows(text: str) -> str:
    """What plotly.js draws for a label: no tag may survive, then entities decode (named ones only from its list)."""
    assert not re.search(r"<[a-zA-Z/]", text), f"plotly would read a tag in {text!r}"

    def entity(m: re.Match) -> str:
        name = m.group(1)
        if name.startswith("#x"):
            return chr(int(name[2:], 16))
        if name.startswith("#"):
            return chr(int(name[1:]))
        return PLOTLY_ENTITIES.get(name, m.group(0))

    return re.sub(r"&(#\d+|#x[\da-fA-F]+|[a-z]+);", entity, text)


# ---------------------------------------------------------------- the two Markdown helpers

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)


@given(TEXT)
def test_literal_shows_any_text_as_typed_in_one_code_span(text):
    shown, tags = rendered(f"**Corpus** · {literal(text)}")
    assert shown == f"Corpus · {text}".strip() and tags <= {"p", "strong", "code"}


@given(TEXT)
def test_escaped_shows_any_text_as_typed(text):
    shown, tags = rendered(escaped(text))
    assert shown == text.strip() and tags <= {"p"}


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_make_no_link_image_or_markup(text):
    for body in (literal(text), escaped(text)):
        _shown, tags = rendered(body)
        assert not tags & {"a", "img", "b", "strong", "em", "h1", "table", "del"}, (text, body)


# ---------------------------------------------------------------- the pages


def _upload(app, name: str, data: bytes):
    app.run()
    at = app.switch_page("app_pages/1_Corpus.py").run()
    at.radio(key="corpus_source").set_value("Upload a file").run()
    return at.file_uploader[0].upload(name, data).run()


ROWS = "".join(f"text number {i} about {'sport' if i % 2 else 'money'},{'a' if i % 2 else 'b'}\n" for i in range(20))


@pytest.mark.parametrize("stem", ["[x](https:e.com)", "![b](a.png)", "<b>x<b>", "a`b"])
def test_a_file_name_shows_literally_in_the_sidebar_and_the_report_heading(app, stem):
    at = _upload(app, f"{stem}.csv", ("text,label\n" + ROWS).encode())
    assert not at.exception and not at.error, [e.value for e in at.error]
    heading, tags = rendered(at.subheader[0].value)
    assert heading == f"Validation report · {stem}" and tags <= {"p", "code"}
    sidebar = [rendered(m.value) for m in at.sidebar.markdown]
    assert (f"Corpus · {stem}", {"p", "strong", "code"}) in sidebar


def test_a_warning_quoting_the_file_name_shows_it_literally(app):
    at = _upload(app, "[x](https:e.com).csv", ("text,label\ncafé au lait,a\n" + ROWS).encode("latin-1"))
    shown = [rendered(w.value) for w in at.warning]
    assert any(text.startswith("[x](https:e.com).csv is not valid UTF-8") and "a" not in tags for text, tags in shown)


def test_class_labels_show_literally_in_the_sidebar(app):
    labels = ["<b>x</b>", "[l](https:e.com)", "**bold**"]
    rows = "".join(f"text {i} on topic {i % 3},{labels[i % 3]}\n" for i in range(30))
    at = paste_table(app, "text;label\n" + rows.replace(",", ";"))
    assert not at.exception and not at.error, [e.value for e in at.error]
    captions = [rendered(c.value) for c in at.sidebar.caption]
    assert any(text.endswith("3 classes: " + ", ".join(sorted(labels))) and tags <= {"p", "code"}
               for text, tags in captions), captions


# ---------------------------------------------------------------- plotly labels


TRICKY = ['"', "'", "<b>x</b>", "a & b", "&quot;", "x<br>y", "%{x}"]


def test_map_legend_and_hover_show_labels_and_texts_as_typed():
    labels = TRICKY * 2
    fig = map_figure(np.zeros((len(labels), 2)), labels, labels, "map")
    assert sorted(plotly_shows(t.name) for t in fig.data) == sorted(TRICKY)
    assert len({t.hovertemplate for t in fig.data}) == 1  # the label comes from the trace, never the template
    assert "%{fullData.name}" in fig.data[0].hovertemplate
    for trace in fig.data:
        assert plotly_shows(trace.customdata[0][1]) == plotly_shows(trace.name)


@pytest.mark.parametrize("text", TRICKY)
def test_hover_text_shows_a_text_as_typed(text):
    assert plotly_shows(hover_text(text)) == text


def test_attention_tokens_show_as_typed():
    """A quote token showed as &quot;: html.escape's entity, which plotly does not decode."""
    tokens = ['"', "'", "<b>", "&", "x"]
    heat = attention_token_map(np.full((5, 5), 0.2), tokens, "t", "attention")
    assert [plotly_shows(t) for t in heat.layout.yaxis.ticktext] == tokens
    assert [plotly_shows(t) for t in heat.layout.xaxis.ticktext] == tokens
    assert plotly_shows(heat.data[0].text[0][1]) == "#0 \" → #1 '"
    bars = token_weight_bars(tokens, [0.2] * 5, [0.2] * 5)
    assert [plotly_shows(t) for t in bars.layout.xaxis.ticktext] == tokens
    assert [plotly_shows(t) for t in bars.data[0].customdata] == tokens


def test_run_and_recipe_names_show_as_typed():
    curves = layer_curve_figure({"<b>run</b> & co": [0.1, 0.2]})
    assert plotly_shows(curves.data[0].name) == "<b>run</b> & co" and "%{fullData.name}" in curves.data[0].hovertemplate
    point = {"name": '"<i>r</i>"', "recipe": "<b>rec</b>", "polarity": 50.0, "similarity": 40.0, "margin": 0.1}
    trade = tradeoff_figure([point])
    assert plotly_shows(trade.data[0].name) == "<b>rec</b>"
    assert [plotly_shows(v) for v in trade.data[0].customdata[0][:2]] == ['"<i>r</i>"', "<b>rec</b>"]
    sts = sts_change_figure([{"run_id": "x", "name": "<b>a</b> & b", "before": 1.0, "after": 2.0, "change": 1.0}])
    assert plotly_shows(sts.data[-1].y[0]) == "<b>a</b> & b"  # a row is the run's label (issue 31, item 3.4)
    assert plotly_shows(sts.data[-1].customdata[0][0]) == "<b>a</b> & b"


def test_plot_text_escapes_only_what_plotly_reads():
    assert plot_text('<a href="x">&"\'') == "&lt;a href=\"x\"&gt;&amp;\"'"


# ---------------------------------------------------------------- item 8: loopback only, foreign Host refused


def test_the_default_config_binds_to_this_machine_and_lists_only_loopback_hosts():
    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert server["address"] == "localhost"
    assert set(server["allowedHosts"]) == {"localhost", "127.0.0.1", "::1"}
    run_target = re.search(r"^run:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "--server.address localhost" in run_target and "0.0.0.0" not in run_target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _handshake(port: int, host: str) -> str:
    """The status line the server answers a session's WebSocket handshake with, under this Host header."""
    request = (f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request.encode())
        return s.recv(4096).decode("latin-1").split("\r\n")[0]


def test_the_server_refuses_a_session_under_a_foreign_host_header(tmp_path):
    """A DNS-rebinding page reaches 127.0.0.1 under its own name: its Host header gives it away."""
    port = _free_port()
    script = tmp_path / "app.py"
    script.write_text("import streamlit as st\nst.write('hi')\n")
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port)]
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as server:
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                    break
                except OSError:
                    assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
                    time.sleep(0.3)
            assert " 101 " in _handshake(port, f"localhost:{port}")
            assert " 101 " in _handshake(port, f"127.0.0.1:{port}")
            assert " 403 " in _handshake(port, f"rebound.example:{port}")
            assert " 403 " in _handshake(port, "localhost.rebound.example")
        finally:
            server.terminate()
            server.wait(timeout=20)
