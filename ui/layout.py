"""The frame around every page: the sidebar summary of what the session works on, and the corpus check."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.data.corpus import Corpus
from core.data.kinds import KIND_NAMES
from core.data.lists import ListCorpus
from core.data.pairs import PairCorpus
from core.runs.labels import run_label
from ui import nav, state
from ui.corpus_view import list_summary, pair_summary
from ui.resources import device, run_store
from ui.run_control import get_run
from ui.run_picker import shown_run


def require_corpus(page: str, kind: str = "labelled") -> Corpus | PairCorpus | ListCorpus:
    """The current corpus when it is of `kind`, else one line saying what `page` needs, a link to the Corpus
    page and the end of this page's run (pair and list corpora have no labels to colour maps or score P@k with)."""
    corpus = state.corpus()
    if corpus is None:
        st.info("No corpus loaded yet — load one on the Corpus page.")
    elif corpus.kind != kind:
        st.info(f"The {page} page needs {KIND_NAMES[kind]}; load one on the Corpus page.")
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
            st.markdown(f"**Corpus** · {corpus.name}")
            if corpus.kind == "pairs":
                st.caption(pair_summary(corpus))
            elif corpus.kind == "lists":
                st.caption(list_summary(corpus))
            else:
                n_rows = len(corpus.train_texts) + len(corpus.test_texts)
                st.caption(f"{n_rows:,} rows · {len(corpus.classes)} classes: {_class_list(corpus.classes)}")
        st.markdown(f"**Reference model** · `{model_label(model)}`", help=model)
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


def _class_list(classes: list[str], limit: int = 6) -> str:
    shown = ", ".join(classes[:limit])
    return shown + (f", … (+{len(classes) - limit})" if len(classes) > limit else "")
