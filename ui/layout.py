"""What every page starts with: page config, session state and the sidebar summary."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import state
from ui.feedback import guard
from ui.nav import steps
from ui.resources import device


def page_setup(title: str, icon: str = ":material/hub:") -> None:
    """Call first on every page: wide layout, state filled in (demo corpus on first view), sidebar drawn."""
    st.set_page_config(page_title=f"{title} · ContrastLab", page_icon=icon, layout="wide")
    with guard("Loading the demo corpus"):
        state.init()
    sidebar()


def require_corpus():
    """The current corpus, or a short pointer to the Corpus page and the end of this page's run."""
    corpus = state.corpus()
    if corpus is None:
        st.info("No corpus loaded yet — load one on the Corpus page.")
        st.page_link("pages/1_Corpus.py", label="Corpus", icon=":material/table_view:")
        st.stop()
    return corpus


def model_label(name: str) -> str:
    """A model path shortened to its folder name; packaged names and hub ids unchanged."""
    return Path(name).name if "/" in name and Path(name).expanduser().exists() else name


def sidebar() -> None:
    """Page links, then the current corpus, reference model, selected run and device, so every page says
    what it works on. The links replace Streamlit's own list (off in config.toml), which would call the
    home page "app"."""
    corpus, model, run = state.corpus(), state.model_name(), state.run_id()
    with st.sidebar:
        st.page_link("app.py", label="Home", icon=":material/home:")
        for step in steps():
            if step.path:
                st.page_link(step.path, label=step.label, icon=step.icon)
    with st.sidebar, st.container(border=True):
        if corpus is None:
            st.markdown("**Corpus** · none loaded")
        else:
            n_rows = len(corpus.train_texts) + len(corpus.test_texts)
            st.markdown(f"**Corpus** · {corpus.name}")
            st.caption(f"{n_rows:,} rows · {len(corpus.classes)} classes: {_class_list(corpus.classes)}")
        st.markdown(f"**Reference model** · `{model_label(model)}`", help=model)
        st.markdown(f"**Run** · {f'`{run}`' if run else 'none selected'}")
        st.markdown(f"**Device** · {device()}")


def _class_list(classes: list[str], limit: int = 6) -> str:
    shown = ", ".join(classes[:limit])
    return shown + (f", … (+{len(classes) - limit})" if len(classes) > limit else "")
