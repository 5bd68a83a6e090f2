"""Choosing among arms without looking at the test split: where a claim is "A beats the best of B1..Bn" (mgh's
curriculum against the best fixed band), the best Bk is chosen on validation rows no arm trained on, and only the
difference on the test items is reported. An experiment declares it with a Validation; the job then trains every
arm on a training view of the file (its share of training rows held out as 'validation'), and scores the candidate
arms' models on a validation view (the training rows and the held-out ones as targets, no test rows)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from core.reproduce.experiment import Arm, Outcome, Validation

SEED = 0


def views(source: Path, share: float, folder: Path) -> tuple[Path, Path]:
    """(training view, validation view) of a labelled file with a split column, written into `folder`. The training
    view is the file with `share` of each label's training rows (seeded) marked 'validation', which a run neither
    trains on nor scores, its targets being the test rows. The validation view holds its training and validation
    rows only, so the validation rows are the targets and the training rows the kNN pool."""
    from core.data.table import clean_texts, read_file

    df = read_file(source)[0].copy()
    split = clean_texts(df["split"], "split").str.lower()
    rng = np.random.default_rng(SEED)
    held: list[int] = []
    for _label, rows in df[split == "train"].groupby("label", sort=True):
        count = int(round(share * len(rows)))
        held += rng.choice(rows.index.to_numpy(), count, replace=False).tolist() if count else []
    df.loc[held, "split"] = "validation"
    folder.mkdir(parents=True, exist_ok=True)
    training, validation = folder / source.name, folder / f"{source.stem}-validation.csv"
    df.to_csv(training, index=False)
    df[df["split"] != "test"].to_csv(validation, index=False)
    return training, validation


def hold_out(arms: list[Arm], validation: Validation, data: Path, folder: Path) -> tuple[list[Arm], Path, Path]:
    """(the arms trained on the training view of `validation.source` instead of the file, the training view, the
    validation view)."""
    training, held = views(data / validation.source, validation.share, folder)
    moved = [Arm(a.label, {**a.config, "corpus": str(training)}) if Path(a.config["corpus"]).name == validation.source
             else a for a in arms]
    return moved, training, held


def score_candidates(outcomes: dict[str, Outcome], validation: Validation, held: Path, store, reference: str,
                     progress=None) -> dict[str, Outcome]:
    """The outcomes with each candidate arm's figures on the validation view (Outcome.validation)."""
    from core.data.kinds import load_any
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.models.loading import load_model

    corpus = load_any(held)
    base = load_model(reference)
    out = dict(outcomes)
    for label, outcome in outcomes.items():
        if not label.startswith(validation.candidates):
            continue
        if progress:
            progress(phase=f"validation: {label}")
        model = load_model(store.get(outcome.run_id).artefacts["model"])
        out[label] = replace(outcome, validation=evaluate_corpus(model, base, corpus, layers=False))
    return out


def best(outcomes: dict[str, Outcome], validation: Validation) -> tuple[str, float] | None:
    """(label, figure) of the candidate with the highest validation figure (the first of equals), None without."""
    scored = [(label, o.validation[validation.metric]) for label, o in outcomes.items()
              if label.startswith(validation.candidates) and o.validation.get(validation.metric) is not None]
    return max(scored, key=lambda item: item[1]) if scored else None
