"""What every page starts with: page config, session state and the sidebar summary."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.errors import UserError
from core.runs.labels import run_label
from core.runs.store import RunStore
from ui import state
from ui.feedback import guard
from ui.nav import steps
from ui.resources import device
from ui.run_picker import shown_run


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
    corpus, model = state.corpus(), state.model_name()
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
        try:
            status = RunStore().get(selected).status
        except UserError:
            return  # deleted on the Runs page
        where = "on another corpus" if status == "done" else status
        st.caption(f"Selected run `{selected}`: {where}")


def _class_list(classes: list[str], limit: int = 6) -> str:
    shown = ", ".join(classes[:limit])
    return shown + (f", … (+{len(classes) - limit})" if len(classes) > limit else "")
