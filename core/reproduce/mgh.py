"""Seed 004's curriculum (docs/definitions.md, multi-granularity hard negatives): coarse-to-fine band order beats a
random order, the reverse order and a fixed band. The paper shows it in a figure without numbers; each "beats" is a
paired difference of kNN accuracy on the same TREC test questions. The negatives are mined bands, or with
--generator four a language model writes for each TREC training question, as the paper's were written."""

from __future__ import annotations

from pathlib import Path

from core.reproduce.experiment import Arm, Experiment, Generation, Outcome, Row, Setup, Source, difference, row

ORDERS = ("curriculum", "random", "reverse")
FULL_ONLY = ("fixed:1", "fixed:4")
BATCH = 32
GENERATION = Generation(
    "negatives", "trec.csv", "text", "negatives",
    paper="four LLM-written negatives per query in decreasing similarity (Figure 2, Table 6)",
    substitute="bands of reference-cosine rank among other-label TREC training questions (N1 = ranks 1-5, N2 = "
               "6-20, N3 = 21-50, N4 = 51-100)")


def _steps(quick: bool) -> int:
    return 20 if quick else 100


def arms(data: Path, setup: Setup) -> list[Arm]:
    base = {"corpus": str(data / "trec.csv"), "recipe": "mgh", "model": setup.model, "margin": 20.0,
            "batch_size": BATCH, "examples": _steps(setup.quick) * BATCH, "epochs": 1.0, "seed": 0}
    orders = ORDERS if setup.quick else ORDERS + FULL_ONLY
    return [Arm(f"order {order}", {**base, "order": order}) for order in orders]


def rows(outcomes: dict[str, Outcome], setup: Setup) -> list[Row]:
    differs = (f"{setup.model_name} on TREC, {_steps(setup.quick)} steps of {BATCH} (the paper reports a figure, not "
               f"numbers: curriculum best and most stable, reverse poor); negatives: {setup.trained_on(GENERATION)}")
    first = next(iter(outcomes.values()))
    out = [row("TREC kNN accuracy (%) before training", None, first.before, "knn_accuracy", scale=100)]
    out += [row(f"TREC kNN accuracy (%) after, band {label}", None, o.after, "knn_accuracy", differs, scale=100)
            for label, o in outcomes.items()]
    curriculum = outcomes[f"order {ORDERS[0]}"].after
    out += [difference(f"kNN accuracy (pp): curriculum - {label.removeprefix('order ')}", None, o.after, curriculum,
                       "knn_accuracy", differs, scale=100)
            for label, o in outcomes.items() if label != f"order {ORDERS[0]}"]
    return out


EXPERIMENT = Experiment(
    name="mgh", title="Hard negatives with a curriculum", paper="seed 004: a coarse-to-fine curriculum of hard "
    "negative bands beats random, reverse and fixed orders (a figure, no numbers)",
    sources=(Source("trec.csv", "text, label, split with train and test rows", targets="test"),), arms=arms, rows=rows,
    generation=GENERATION)
