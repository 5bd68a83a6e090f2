"""Process-wide resources: loaded models and the device, shared by all sessions and reruns."""

from __future__ import annotations

import streamlit as st

from core.models.loading import load_model, pick_device
from ui import state


@st.cache_resource(show_spinner=False)
def device() -> str:
    """Picked once per server process (CUDA > MPS > CPU); importing torch is the slow part."""
    return pick_device()


@st.cache_resource(max_entries=4, show_spinner="Loading model…")
def _load(name: str, device: str):
    return load_model(name, device)


def get_model(name: str | None = None):
    """The SentenceTransformer for `name` (default: the session's reference model) on the current device.

    Cached by (name, device) and shared between sessions, so treat it as read-only: training must load
    its own copy. Raises UserError when the model cannot be found or loaded (errors are not cached).
    """
    return _load(name or state.model_name(), device())
