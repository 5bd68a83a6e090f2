"""Streamlit glue shared by all pages; the logic itself lives in core/.

app.py registers the pages (``nav``), sets the page config, fills in the session state (``state``) and draws
the sidebar summary (``layout``) before running the page, so a page starts with its own content:

    import ui
    corpus = ui.require_corpus("Maps")
    with ui.guard("Computing the maps") as outcome, ui.progress_bar() as bar:
        result = core_function(ui.get_model(), corpus, progress=bar)
    ui.plot(figure, "maps", key="maps_chart")

- ``nav``: every page once (file, title, icon), ``navigation`` for app.py, ``link`` between pages.
- ``state``: the session's corpus, reference model, selected run and caches.
- ``layout``: the sidebar summary, ``require_corpus``, ``model_label``.
- ``resources``: process-wide models, device and run store.
- ``feedback``: progress bars and error boxes (``guard``).
- ``charts``: ``plot``, a figure with its HTML download.
- ``corpus_view``: a corpus's tables and charts.
- ``run_picker``: the finished run(s) a comparison page shows.
- ``run_control``: the selected run (session and URL), starting and deleting runs.
- ``run_panel``: one run live: status, progress, outcome, curves, cancel.
- ``run_tables``: the runs table and two runs compared.
- ``run_export``: exporting a run and downloading the files.
"""

from ui import nav, state
from ui.charts import plot
from ui.feedback import ProgressBar, guard, progress_bar
from ui.layout import model_label, require_corpus, sidebar
from ui.resources import device, get_model, run_store

__all__ = ["ProgressBar", "device", "get_model", "guard", "model_label", "nav", "plot", "progress_bar",
           "require_corpus", "run_store", "sidebar", "state"]
