"""Process-wide resources: loaded models, the device and the run store, shared by all sessions and reruns."""

from __future__ import annotations

import streamlit as st

from core.errors import UserError
from core.models.loading import load_model, pick_device, visible_gpus
from core.runs.store import RunStore
from core.storage import home
from ui import state


@st.cache_resource(show_spinner=False)
def device() -> str:
    """Picked once per server process (CUDA > MPS > CPU); importing torch is the slow part."""
    return pick_device()


@st.cache_resource(show_spinner=False)
def gpu_count() -> int:
    """CUDA devices, counted once per server process: the Train page offers a process count from two on."""
    return visible_gpus()


@st.cache_resource(max_entries=4, show_spinner="Loading model…")
def _load(name: str, device: str):
    return load_model(name, device)


def get_model(name: str | None = None):
    """The SentenceTransformer for `name` (default: the session's reference model) on the current device.

    Cached by (name, device) and shared between sessions, so treat it as read-only: training must load
    its own copy. Raises UserError when the model cannot be found or loaded (errors are not cached).
    """
    return _load(name or state.model_name(), device())


@st.cache_resource(show_spinner=False)
def _store(root: str) -> RunStore:
    return RunStore(root)


def run_store() -> RunStore:
    """The run store under CONTRASTLAB_HOME, opened once per server process (per home, for tests): opening
    one creates its schema under a write lock, which a rerun must not wait for. A busy, full or damaged database
    stops the page with its one-line message (a failed open is not cached, so the next rerun tries again)."""
    try:
        return _store(str(home()))
    except UserError as exc:
        st.error(str(exc))
        st.stop()
