"""Definitions page: docs/definitions.md as it stands, so the app and the docs define the metrics once."""

from pathlib import Path

import streamlit as st

SOURCE = Path(__file__).resolve().parents[1] / "docs" / "definitions.md"


def body(text: str) -> str:
    """The document without its own top heading: the page has its title already."""
    first, _, rest = text.lstrip().partition("\n")
    return rest if first.startswith("# ") else text


st.title("Definitions")
if SOURCE.exists():
    st.markdown(body(SOURCE.read_text(encoding="utf-8")))
else:
    st.warning(f"The definitions are missing: `{SOURCE}` was not found. They ship with the source tree "
               "(docs/definitions.md).", icon=":material/warning:")
