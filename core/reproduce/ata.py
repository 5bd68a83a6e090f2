"""Seed 004's pooling claim (docs/definitions.md, ATA pooling): weighting tokens by the attention they receive beats
mean pooling. The paper's figures are MTEB-56 averages of Mistral-7B; here the same comparison on STS-B."""

from __future__ import annotations

from pathlib import Path

from core.reproduce.experiment import Arm, Experiment, Outcome, Row, Setup, Source, row

ARMS = (("mean pooling", "mean", 65.41), ("ATA pooling", "ata", 65.87))
BATCH = 32


def _steps(quick: bool) -> int:
    return 10 if quick else 100


def arms(data: Path, setup: Setup) -> list[Arm]:
    base = {"corpus": str(data / "stsb.csv"), "recipe": "cosent", "model": setup.model, "margin": 20.0,
            "batch_size": BATCH, "examples": _steps(setup.quick) * BATCH, "max_steps": _steps(setup.quick),
            "epochs": 1.0, "seed": 0}
    return [Arm(label, {**base, "pooling": pooling}) for label, pooling, _ in ARMS]


def rows(outcomes: dict[str, Outcome], setup: Setup) -> list[Row]:
    differs = (f"STS-B test Spearman of {setup.model_name} after CoSENT, {_steps(setup.quick)} steps of {BATCH} "
               "(paper: MTEB-56 average, Mistral-7B)")
    return [row(f"after training with {label}", published, outcomes[label].after, "sts_spearman", differs)
            for label, _, published in ARMS]


EXPERIMENT = Experiment(
    name="ata", title="ATA pooling", paper="seed 004: ATA pooling 65.87 vs mean pooling 65.41 (MTEB-56 average, "
    "Mistral-7B)", sources=(Source("stsb.csv", "text1, text2, score, split with train and test rows"),),
    arms=arms, rows=rows)
