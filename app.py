"""ContrastLab's entry point (`streamlit run app.py`): on every rerun it registers the pages, sets the page
config, fills in the session state and draws the sidebar summary once, then runs the page picked."""

import streamlit as st

import ui

# The favicon first: until one is set, the frontend makes the current page's Material icon the favicon, an image
# it fetches from Google's font host; the app promises never to phone home.
st.set_page_config(page_icon=ui.nav.FAVICON, layout="wide")
page = ui.nav.navigation()
st.set_page_config(page_title=f"{page.title} · ContrastLab")
with ui.guard("Loading the demo corpus"):
    ui.state.init()
ui.sidebar()
page.run()
