"""ContrastLab's entry point (`streamlit run app.py`): on every rerun it registers the pages, sets the page
config, fills in the session state and draws the sidebar summary once, then runs the page picked."""

import streamlit as st

import ui

page = ui.nav.navigation()
st.set_page_config(page_title=f"{page.title} · ContrastLab", page_icon=page.icon, layout="wide")
with ui.guard("Loading the demo corpus"):
    ui.state.init()
ui.sidebar()
page.run()
