"""The frame around every page: the sidebar summary of what the session works on, and the corpus check."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from core.data.corpus import Corpus
from core.data.kinds import kind_of
from core.data.lists import ListCorpus
from core.data.pairs import PairCorpus
from core.runs.labels import run_label
from ui import nav, state
from ui.resources import device, run_store
from ui.run_control import get_run
from ui.run_picker import shown_run


def literal(text: object) -> str:
    """`text` as a Markdown code span, for a name or label shown on its own (a file name, a class).

    Nothing inside a code span is parsed: not links, images, HTML or emphasis, and not what Streamlit turns into
    emoji, icons or links in plain text even when escaped (:smile:, :streamlit:, www.x.com). The fence is one
    backtick longer than any run inside, padded with a space where the text starts or ends with one.
    """
    text = str(text).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if not text or text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def escaped(text: object) -> str:
    """`text` with every ASCII punctuation character backslash-escaped, for a sentence that quotes user input (a
    report warning naming a file): CommonMark lets any of them be escaped, so no link, image, HTML, emphasis,
    heading, table, $math$ or :directive[...] can form."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", str(text))


def require_corpus(page: str, kind: str = "labelled") -> Corpus | PairCorpus | ListCorpus:
    """The current corpus when it is of `kind`, else one line saying what `page` needs, a link to the Corpus
    page and the end of this page's run (pair and list corpora have no labels to colour maps or score P@k with)."""
    corpus = state.corpus()
    if corpus is None:
        st.info("No corpus loaded yet — load one on the Corpus page.")
    elif corpus.kind != kind:
        st.info(f"The {page} page needs {kind_of(kind).title}; load one on the Corpus page.")
    else:
        return corpus
    nav.link(nav.CORPUS)
    st.stop()


def model_label(name: str) -> str:
    """A model path shortened to its folder name; packaged names and hub ids unchanged."""
    return Path(name).name if "/" in name and Path(name).expanduser().exists() else name


def sidebar() -> None:
    """Below the page list: the current corpus, reference model, selected run and device, so every page
    says what it works on."""
    corpus, model = state.corpus(), state.model_name()
    with st.sidebar, st.container(border=True):
        if corpus is None:
            st.markdown("**Corpus** · none loaded")
        else:
            st.markdown(f"**Corpus** · {literal(corpus.name)}")
            st.caption(kind_of(corpus).caption(corpus, literal))
        st.markdown(f"**Reference model** · {literal(model_label(model))}", help=literal(model))
        run_line()
        st.markdown(f"**Device** · {device()}")


def run_line() -> None:
    """The run the comparison pages show by default, and the session's own run while it is still training."""
    corpus, selected = state.corpus(), state.run_id()
    shown = shown_run(corpus) if corpus is not None else None
    if shown is None:
        st.markdown("**Run** · no finished run yet")
    else:
        st.markdown(f"**Run** · `{shown.id}`", help=run_label(shown))
        st.caption(f"{run_label(shown).rsplit(' · ', 1)[0]}{'' if shown.id == selected else ' · newest finished'}")
    if selected and selected != (shown.id if shown else None):
        run = get_run(run_store(), selected)
        if run is None:
            return  # deleted on the Runs page
        where = "on another corpus" if run.status == "done" else run.status
        st.caption(f"Selected run `{selected}`: {where}")


