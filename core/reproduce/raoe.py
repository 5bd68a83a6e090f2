"""Seed 001's headline (docs/definitions.md, RAOE): on STS-B, CoSENT < AnglE < RAOE; its stage 2 fine-tunes on
STS-B train with L_rank only and the gold score as s."""

from __future__ import annotations

from pathlib import Path

from core.reproduce.experiment import Arm, Experiment, Outcome, Row, Setup, Source, row
from core.training.raoe import PAPER_BATCH, effective_interval

ARMS = (  # label, recipe settings, published STS-B Spearman (BERT-base)
    ("CoSENT", {"recipe": "cosent", "margin": 20.0}, 78.99),
    ("AnglE", {"recipe": "angle", "margin": 20.0}, 85.64),
    ("RAOE stage 2 (L_rank, s = gold score)", {"recipe": "raoe_rank", "teacher": "score"}, 88.55),
)


def _budget(quick: bool) -> dict:
    return {"examples": 256, "batch_size": 16} if quick else {"examples": 6000, "batch_size": 32}


def arms(data: Path, setup: Setup) -> list[Arm]:
    base = {"corpus": str(data / "stsb.csv"), "model": setup.model, "epochs": 1.0, "seed": 0, **_budget(setup.quick)}
    return [Arm(label, {**base, **settings}) for label, settings, _ in ARMS]


def _stage2_text(config: dict, setup: Setup) -> str:
    """Where the stage-2 arm starts, and its rank margin at this batch: below one rank, L_rank is CoSENT's."""
    i_eff = effective_interval(config["interval"], config["batch_size"])
    return (f"; from {setup.model_name} (paper: from its stage-1 RAOE model, 87.59); I_eff = {config['interval']} x "
            f"{config['batch_size']} / {PAPER_BATCH} = {i_eff:g}"
            + (", so L_rank keeps every ordered pair (CoSENT's, plus tied scores ordered by position)"
               if i_eff < 1 else ""))


def rows(outcomes: dict[str, Outcome], setup: Setup) -> list[Row]:
    pairs = "256 STS-B train pairs" if setup.quick else "every STS-B train pair"
    differs = f"{setup.model_name} (paper: BERT-base); {pairs}, 1 epoch, gold score as labels"
    out = [row(f"STS-B test Spearman of {setup.model_name} before training", None,
               outcomes[ARMS[0][0]].before, "sts_spearman")]
    for label, _, published in ARMS:
        extra = _stage2_text(outcomes[label].config, setup) if "stage 2" in label else ""
        out.append(row(f"STS-B test Spearman after {label}", published, outcomes[label].after, "sts_spearman",
                       differs + extra))
    return out


EXPERIMENT = Experiment(
    name="raoe", title="RAOE: rank and angle on STS-B", paper="seed 001: STS-B Spearman CoSENT 78.99 < AnglE 85.64 "
    "< RAOE 87.59, and 88.55 after stage 2 (BERT-base)",
    sources=(Source("stsb.csv", "text1, text2, score, split with train and test rows"),), arms=arms, rows=rows)
