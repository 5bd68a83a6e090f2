"""The workflow's steps for the home page, linked only when their page file exists.

Other pages are added over time; matching files by name means the home page never links a page
that is not there (st.page_link raises for unknown pages) and picks up new ones without edits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLAN = (
    ("Corpus", ":material/table_view:", "Upload or paste a labelled corpus, check it, score the reference model."),
    ("Train", ":material/model_training:", "Fine-tune with a supervised, self-supervised or seed objective."),
    ("Maps", ":material/scatter_plot:", "t-SNE and UMAP of reference vs fine-tuned embeddings, side by side."),
    ("Layers", ":material/stacked_line_chart:", "kNN accuracy of every layer, reference vs fine-tuned."),
    ("Trade-off", ":material/balance:", "Polarity P@k vs semantic similarity S@k for every run, with the Pareto front."),
    ("Attention", ":material/visibility:", "Per-head attention and ATA token weights for one text."),
    ("Runs & export", ":material/inventory_2:", "Compare and delete runs; export models, embeddings and plots."),
)


@dataclass(frozen=True)
class Step:
    label: str
    icon: str
    blurb: str
    path: str | None  # relative to the app's root, as st.page_link wants it; None: not built yet


def _key(name: str) -> str:
    """'5_Trade-off' and 'Trade-off' -> 'tradeoff'; '7_Runs_and_export' and 'Runs & export' -> 'runs'."""
    words = re.split(r"[\s_&]+", re.sub(r"^\d+[_\s]*", "", name).lower())
    return re.sub(r"[^a-z0-9]", "", words[0])


def steps(root: Path = ROOT) -> list[Step]:
    """The planned steps in order, then any page the plan does not name."""
    files = {_key(f.stem): f for f in sorted((root / "pages").glob("[!_]*.py"))}
    out = []
    for label, icon, blurb in PLAN:
        found = files.pop(_key(label), None)
        out.append(Step(label, icon, blurb, found.relative_to(root).as_posix() if found else None))
    for f in files.values():
        label = re.sub(r"^\d+[_\s]*", "", f.stem).replace("_", " ")
        out.append(Step(label, ":material/article:", "", f.relative_to(root).as_posix()))
    return out
