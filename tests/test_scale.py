"""Issue 13 §3, 100k-row corpora: a large table validates with progress and the same report, the Corpus page fills
in its over-long count with progress after the report, and the scale benchmark's corpus and per-phase peak RSS."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import core.models.encode
from bench.scale import Phase, measured, proc_status, write_corpus
from core.data.corpus import BUILD_STAGES, build_corpus, detect_columns
from core.data.table import read_table
from tests.conftest import shared_data

N_ROWS = 100_000
CLASSES = ("sport", "world", "business", "science")


def large_table(n: int = N_ROWS) -> pd.DataFrame:
    """n short synthetic rows with what a real corpus brings: empty texts, missing labels, repeated texts."""
    rng = np.random.default_rng(0)
    words = np.array("the a match market team rates vote storm cell stock goal court orbit trade".split())
    picks = rng.integers(0, len(words), size=(n, 4))
    texts = [f"{' '.join(words[p])} {i}" for i, p in enumerate(picks)]
    for i in range(0, n, 997):
        texts[i] = ""
    for i in range(5, n, 1009):
        texts[i] = texts[i - 3]  # a repeat of an earlier text
    labels = np.array(CLASSES, dtype=object)[rng.integers(0, len(CLASSES), n)]
    labels[7::1013] = None
    return pd.DataFrame({"text": texts, "label": labels})


def test_a_100k_row_table_validates_with_progress_and_the_same_report():
    frame = large_table()
    df, warnings = read_table(frame.to_csv(index=False).encode(), "large.csv")
    calls: list[tuple[str, int, int]] = []
    corpus = build_corpus(df, detect_columns(df), "large", warnings=warnings,
                          progress=lambda *a: calls.append(a))
    assert [(done, total) for _, done, total in calls] == [(i, len(BUILD_STAGES)) for i in range(len(BUILD_STAGES) + 1)]
    assert all(label.startswith(f"Validating {N_ROWS:,} rows: ") for label, _, _ in calls)
    assert calls[-1][0].endswith("done")

    plain = build_corpus(df, detect_columns(df), "large", warnings=warnings)  # progress changes nothing
    assert corpus.report.as_dict() == plain.report.as_dict() and corpus.fingerprint == plain.fingerprint

    empty = frame["text"].eq("")
    missing = frame["label"].isna() & ~empty
    kept = frame[~empty & ~missing]
    report = corpus.report
    assert (report.rows_read, report.rows_kept) == (N_ROWS, len(kept))
    assert (report.empty_dropped, report.missing_label_dropped) == (int(empty.sum()), int(missing.sum()))
    assert report.duplicates == int(kept["text"].duplicated().sum()) > 0
    assert report.class_counts == kept["label"].value_counts().to_dict()
    assert len(corpus.train_texts) + len(corpus.test_texts) == len(kept)


def test_corpus_page_fills_the_overlong_card_with_progress(app, tiny_model, monkeypatch):
    limit = tiny_model.max_seq_length
    long_text = " ".join(["water"] * (limit + 5))
    rows = [f"sentence {i} about topic {i % 3},{'abc'[i % 3]}" for i in range(3000)]
    rows += [f"{long_text} {i},a" for i in range(3)]
    seen: list[tuple[int, int]] = []
    real = core.models.encode.count_overlong

    def spy(model, texts, progress=None):
        def both(done: int, total: int) -> None:
            seen.append((done, total))
            progress(done, total)  # the page's progress bar

        return real(model, texts, progress=both)

    monkeypatch.setattr(core.models.encode, "count_overlong", spy)
    app.run()
    at = app.switch_page("app_pages/1_Corpus.py").run()
    at.radio(key="corpus_source").set_value("Upload a file").run()
    at.file_uploader[0].upload("big.csv", ("text,label\n" + "\n".join(rows)).encode(), "text/csv").run()
    assert not at.exception and not at.error
    cards = {m.label: m.value for m in at.metric}
    assert cards["Rows read"] == "3,003" and cards["Over-long texts"] == "3"
    assert seen and seen[-1] == (3003, 3003)


# ---------------------------------------------------------------- the benchmark's own parts


def test_the_scale_corpus_keeps_the_two_datasets_labels_apart(tmp_path):
    sst2 = pd.read_csv(shared_data("sst2.csv"))
    sarcasm = pd.read_csv(shared_data("sarcasm_headlines.csv"))
    full = pd.read_csv(write_corpus(tmp_path))
    assert len(full) == int((sst2["split"] == "train").sum()) + len(sarcasm)
    assert sorted(full["label"].unique()) == sorted(
        [f"sst2:{v}" for v in sst2["label"].unique()] + [f"sarcasm:{v}" for v in sarcasm["label"].unique()])
    sample = pd.read_csv(write_corpus(tmp_path, rows=500))
    assert len(sample) == 500 and {"sst2", "sarcasm"} == {label.split(":")[0] for label in sample["label"]}


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
def test_each_phase_gets_its_own_peak_rss():
    phases: list[Phase] = []
    size = 320 * 2**20
    measured(phases, "large", lambda: np.ones(size // 8).sum())
    measured(phases, "small", lambda: None)
    large, small = phases
    assert large.peak - proc_status()["VmRSS"] > 0.8 * size  # the array was counted while it lived...
    assert small.peak < large.peak - 0.8 * size  # ...and not in the next phase's peak
    assert large.where == small.where == "app" and large.seconds >= 0
