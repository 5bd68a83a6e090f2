"""The app's pages, each named once (file, title, icon, the home page's blurb): app.py registers them with
st.navigation, the home page lists the workflow from them, and links between pages go through `link`.

The files live in app_pages/, not pages/: a pages/ folder beside app.py switches Streamlit to its old multipage
mode whenever a server's first run (or any AppTest run) asks for a page, and that page then runs without app.py.

Page icons are Material icons, which Streamlit draws from the font it bundles, except as a favicon: a `:material/...:`
favicon is fetched from fonts.gstatic.com, so the app sets its own (FAVICON) before registering the pages.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from core.storage import ASSETS

FAVICON = ASSETS / "favicon.png"  # served by the app itself, like every file the page loads


@dataclass(frozen=True)
class AppPage:
    path: str  # the page file relative to the app's root, as st.Page and st.page_link take it
    title: str
    icon: str
    blurb: str = ""


HOME = AppPage("app_pages/0_Home.py", "Home", ":material/home:")
CORPUS = AppPage("app_pages/1_Corpus.py", "Corpus", ":material/table_view:",
                 "Upload or paste a labelled corpus, check it, score the reference model.")
TRAIN = AppPage("app_pages/2_Train.py", "Train", ":material/model_training:",
                "Fine-tune with a supervised, self-supervised or seed objective.")
MAPS = AppPage("app_pages/3_Maps.py", "Maps", ":material/scatter_plot:",
               "t-SNE and UMAP of reference vs fine-tuned embeddings, side by side.")
LAYERS = AppPage("app_pages/4_Layers.py", "Layers", ":material/stacked_line_chart:",
                 "kNN accuracy of every layer, reference vs fine-tuned.")
TRADEOFF = AppPage("app_pages/5_Trade-off.py", "Trade-off", ":material/balance:",
                   "Polarity P@k vs semantic similarity S@k for every run, with the Pareto front.")
ATTENTION = AppPage("app_pages/6_Attention.py", "Attention", ":material/visibility:",
                    "Per-head attention and ATA token weights for one text.")
RUNS = AppPage("app_pages/7_Runs.py", "Runs & export", ":material/inventory_2:",
               "Compare and delete runs; export models, embeddings and plots.")
GENERATE = AppPage("app_pages/10_Generate.py", "Generate", ":material/edit_note:",
                   "Write ranked lists (seed 003) or graded hard negatives (seed 004) with a language model.")
REPRODUCTIONS = AppPage("app_pages/9_Reproductions.py", "Reproductions", ":material/science:",
                        "Each seed paper's headline experiment: its claims, the published figures and ours.")
DEFINITIONS = AppPage("app_pages/8_Definitions.py", "Definitions", ":material/menu_book:",
                      "What each metric and method means: P@k and S@k, kNN accuracy, example mining, crops, "
                      "aligned maps, ATA pooling.")

WORKFLOW = (CORPUS, TRAIN, MAPS, LAYERS, TRADEOFF, ATTENTION, RUNS)
PAGES = (HOME, *WORKFLOW, GENERATE, REPRODUCTIONS, DEFINITIONS)


def navigation() -> st.Page:
    """Register every page (the home page at the app's root URL) and return the one to run."""
    return st.navigation([st.Page(p.path, title=p.title, icon=p.icon, default=p is HOME) for p in PAGES])


def link(page: AppPage, label: str | None = None) -> None:
    """A link to one of the app's pages with its icon; the label defaults to the page's title."""
    st.page_link(page.path, label=label or page.title, icon=page.icon)
