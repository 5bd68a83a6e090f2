"""Streamlit glue shared by all pages; the logic itself lives in core/.

Typical page:

    import ui
    ui.page_setup("Maps")
    corpus = ui.state.corpus()
    with ui.guard("Computing the maps") as outcome, ui.progress_bar() as bar:
        result = core_function(ui.get_model(), corpus, progress=bar)
"""

from ui import state
from ui.feedback import ProgressBar, guard, progress_bar
from ui.layout import model_label, page_setup, require_corpus, sidebar
from ui.nav import Step, steps
from ui.resources import device, get_model

__all__ = ["ProgressBar", "Step", "device", "get_model", "guard", "model_label", "page_setup", "progress_bar",
           "require_corpus", "sidebar", "state", "steps"]
