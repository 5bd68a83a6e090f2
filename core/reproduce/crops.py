"""Seed 002's headline (docs/definitions.md, crop augmentation): two crops of one document as a positive pair beat
dropout augmentation, most of the gain coming in the first ~100 batches of 64."""

from __future__ import annotations

from pathlib import Path

from core.reproduce.experiment import Arm, Experiment, Outcome, Row, Setup, Source, row

ARMS = (("crops", "crop"), ("dropout (baseline)", "dropout"))


def _budget(quick: bool) -> tuple[int, int]:
    """(batches, batch size): the paper's ~100 batches of 64; --quick 20 of 32."""
    return (20, 32) if quick else (100, 64)


def arms(data: Path, setup: Setup) -> list[Arm]:
    batches, size = _budget(setup.quick)
    base = {"corpus": str(data / "bbc_news.csv"), "model": setup.model, "margin": 20.0, "batch_size": size,
            "max_steps": batches, "examples": batches * size, "epochs": 1.0, "lr": 2e-5, "seed": 0}
    return [Arm(label, {**base, "recipe": recipe}) for label, recipe in ARMS]


def rows(outcomes: dict[str, Outcome], setup: Setup) -> list[Row]:
    batches, size = _budget(setup.quick)
    differs = f"{setup.model_name} fine-tuned, {batches} batches of {size}" + (
        " (paper: ~100 batches of 64)" if setup.quick else "")
    first = outcomes[ARMS[0][0]]
    out = [row("BBC News kNN accuracy (%) before training", None, first.before, "knn_accuracy", scale=100)]
    out += [row(f"BBC News kNN accuracy (%) after {label}", None, outcomes[label].after, "knn_accuracy", differs,
                scale=100) for label, _ in ARMS]
    return out


EXPERIMENT = Experiment(
    name="crops", title="Crop augmentation", paper="seed 002: crops of one document as positives beat dropout; "
    "most of the gain within ~100 batches of 64 (no table figure for this corpus)",
    sources=(Source("bbc_news.csv", "text (multi-sentence documents), label, split"),), arms=arms, rows=rows)
