"""Tables, charts and summary lines of a corpus for the pages (presentation only; the data comes from
core.data.corpus, core.data.pairs and core.data.lists, and a recipe's example statistics)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from core.analysis.plots import plot_text
from core.data.corpus import Corpus
from core.data.lists import ListCorpus
from core.data.pairs import NLI_LABELS, PairCorpus
from core.data.table import ColumnError, undetected

# Text columns of mined examples (core.data.mining.COLUMNS, RAOE's ranked pairs), in the order they appear.
EXAMPLE_TEXTS = ("anchor", "positive", "negative", "sentence1", "sentence2")
# Training-preview columns of a list recipe (core.training.listmle.list_preview) as the Train page names them.
LIST_PREVIEW_COLUMNS = {"rank": "rank", "text": "text", "teacher": "teacher cosine", "teacher_rank": "teacher rank",
                        "target": "target", "target_rank": "target rank"}


def pick_note(roles: tuple[str, ...]) -> str:
    """The Corpus page's note while the text and / or label column is neither detected nor picked: its readers pick
    columns in the boxes below it, so it names no CLI flag."""
    return f"{undetected(roles)}; pick {'it' if len(roles) == 1 else 'them'} below."


def column_advice(exc: ColumnError) -> str:
    """A picked column that cannot serve (numbers as texts, scores as labels), worded for the Corpus page: the
    remedy is another pick in the boxes above, not the CLI's flag."""
    return f"{exc.problem}; pick {exc.wanted or 'another column'} above."


def corpus_frame(corpus: Corpus) -> pd.DataFrame:
    """One row per kept text, train rows first: split, label, text (the texts as the model sees them)."""
    n_train, n_test = len(corpus.train_texts), len(corpus.test_texts)
    classes = pd.Series(corpus.classes, dtype=object)
    return pd.DataFrame({
        "split": ["train"] * n_train + [corpus.target_split] * n_test,
        "label": classes.iloc[list(corpus.train_labels) + list(corpus.test_labels)].to_numpy(),
        "text": corpus.train_texts + corpus.test_texts,
    })


def balance_figure(corpus: Corpus) -> go.Figure:
    """Texts per class and split, grouped, so a class missing from the targets or a skew shows at once."""
    summary = corpus.summary()
    rows = [(split, label, n)
            for split, counts in (("train", summary["class_counts_train"]),
                                  (corpus.target_split, summary["class_counts_test"]))
            for label, n in counts.items()]
    df = pd.DataFrame([(split, plot_text(label), n) for split, label, n in rows], columns=["split", "class", "texts"])
    fig = px.bar(df, x="class", y="texts", color="split", barmode="group", text="texts")
    fig.update_traces(textposition="outside", cliponaxis=False)
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=10), legend_title_text="",
                      legend=dict(orientation="h", y=1.12, x=0), xaxis_title=None, yaxis_title="texts")
    fig.update_xaxes(type="category")
    return fig


def pair_frame(corpus: PairCorpus) -> pd.DataFrame:
    """One row per kept pair, train rows first: split, text1, text2 and the score and / or label it has."""
    parts = (("train", corpus.train), (corpus.target_split, corpus.test))
    frame = pd.DataFrame({
        "split": [name for name, part in parts for _ in range(len(part))],
        "text1": [t for _, part in parts for t in part.text1],
        "text2": [t for _, part in parts for t in part.text2],
    })
    if corpus.columns.score is not None:
        frame["score"] = [s for _, part in parts for s in part.scores.tolist()]
    if corpus.columns.label is not None:
        frame["label"] = [NLI_LABELS[code] for _, part in parts for code in part.labels.tolist()]
    return frame


def with_text_labels(frame: pd.DataFrame, corpus: Corpus) -> pd.DataFrame:
    """Examples mined from a labelled corpus with each text's label beside it ("anchor label" after "anchor", ...),
    so the preview shows which texts share a class. The texts are training texts; one the corpus holds under
    several labels shows them all ("a / b")."""
    columns = [c for c in EXAMPLE_TEXTS if c in frame.columns]
    named = text_labels(set(frame[columns].to_numpy().ravel().tolist()), corpus)
    out = frame.copy()
    for col in columns:
        out.insert(out.columns.get_loc(col) + 1, f"{col} label", frame[col].map(named))
    return out


def text_labels(texts: set[str], corpus: Corpus) -> dict[str, str]:
    """Each of `texts` (training texts) with its label, "a / b" for a text the corpus holds under several."""
    labels: dict[str, set[str]] = {}
    for text, code in zip(corpus.train_texts, corpus.train_labels.tolist()):
        if text in texts:
            labels.setdefault(text, set()).add(corpus.classes[code])
    return {text: " / ".join(sorted(classes)) for text, classes in labels.items()}


def list_frame(corpus: ListCorpus, list_id: str) -> pd.DataFrame:
    """One list as the model is asked to order it: rank 1 is the anchor, then its members most related first."""
    for part in (corpus.train, corpus.test):
        if list_id in part.ids:
            members = part.lists[part.ids.index(list_id)]
            return pd.DataFrame({"rank": range(1, len(members) + 1), "text": members})
    raise KeyError(list_id)


def list_preview_frame(stats: dict) -> pd.DataFrame:
    """A list recipe's preview of its first training list (each member after the anchor: its list rank, the
    teacher's cosine to the anchor and rank, the training target and rank), with readable column names."""
    return pd.DataFrame(stats["preview"], columns=list(LIST_PREVIEW_COLUMNS)).rename(columns=LIST_PREVIEW_COLUMNS)


def band_ranks(edges: list[int]) -> list[str]:
    """Each band's reference-cosine ranks among other-label texts ("1–5", "6–20", ...) from its last ranks."""
    return [f"{start + 1}–{stop}" if stop > start + 1 else f"{stop}" for start, stop in zip([0, *edges[:-1]], edges)]


def band_preview_frame(stats: dict, corpus: Corpus) -> pd.DataFrame:
    """The multi-granularity recipe's preview of one anchor (core.training.mgh): the anchor, its positive and its
    four band negatives N1..N4, each with its label (the negatives' differ from the anchor's), the ranks its band
    covers and its reference cosine to the anchor (as text, so the anchor's and positive's empty cells read blank
    rather than "None")."""
    ranks = dict(zip((f"N{b}" for b in range(1, len(stats["edges"]) + 1)), band_ranks(stats["edges"])))
    labels = text_labels({row["text"] for row in stats["preview"]}, corpus)
    return pd.DataFrame({
        "role": [row["role"] for row in stats["preview"]],
        "ranks": [ranks.get(row["role"], "") for row in stats["preview"]],
        "text": [row["text"] for row in stats["preview"]],
        "label": [labels.get(row["text"], "") for row in stats["preview"]],
        "reference cosine": ["" if row["cosine"] is None else f"{row['cosine']:.3f}" for row in stats["preview"]],
    })
