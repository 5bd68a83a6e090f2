"""Seed 000's headline (docs/definitions.md, P@k and S@k): TripletLoss with a small margin keeps more of the
reference model's semantic similarity (S@16) than a large one at about the same polarity (P@16), on SST-2."""

from __future__ import annotations

from pathlib import Path

from core.reproduce.experiment import Arm, Experiment, Outcome, Row, Setup, Source, row

MARGINS = {0.1: (80.6, 35.2), 5.0: (81.3, 29.6)}  # published P@16, S@16 after training
REFERENCE = (63.0, 46.6)  # published P@16, S@16 of all-MiniLM-L6-v2 itself
FULL = {"examples": 2000, "epochs": 1.0, "batch_size": 32}


def _label(margin: float) -> str:
    return f"triplet, margin {margin}"


def arms(data: Path, setup: Setup) -> list[Arm]:
    from core.jobs.quick import quick_config  # torch, through the model's layer count: only when arms are made

    base = {"corpus": str(data / "sst2.csv"), "recipe": "triplet", "distance": "cosine", "seed": 0,
            "model": setup.model}
    return [Arm(_label(m), quick_config(base, m) if setup.quick else {**base, **FULL, "margin": m})
            for m in MARGINS]


def rows(outcomes: dict[str, Outcome], setup: Setup) -> list[Row]:
    config = outcomes[_label(0.1)].config
    top = f", top {config['top_layers']} layers" if config.get("top_layers") else ""
    budget = (f"{config['examples']:,} triplets, {config['epochs']:g} epoch{top} (paper: 50,000 triplets, 5 epochs)"
              + ("" if setup.model_name == "all-MiniLM-L6-v2" else f"; {setup.model_name}"))
    before = outcomes[_label(0.1)].before
    out = [row(f"P@16 of {setup.model_name} (the reference), SST-2 validation", REFERENCE[0], before, "polarity"),
           row("S@16 of the reference", REFERENCE[1], before, "similarity")]
    for margin, (p, s) in MARGINS.items():
        after = outcomes[_label(margin)].after
        out += [row(f"P@16 after TripletLoss (cosine), margin {margin}", p, after, "polarity", budget),
                row(f"S@16 after TripletLoss (cosine), margin {margin}", s, after, "similarity", budget)]
    return out


EXPERIMENT = Experiment(
    name="margins", title="Margins: polarity vs similarity", paper="seed 000: smaller TripletLoss margins keep more "
    "semantic similarity (S@16) at about the same polarity (P@16) on SST-2",
    sources=(Source("sst2.csv", "text, label, split with train and validation rows"),), arms=arms, rows=rows)
