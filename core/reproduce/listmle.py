"""Seed 003's headline (docs/definitions.md, ListMLE post-training): post-training on ranked lists with a
teacher's similarities nudged toward the list order raises STS; its ablations (the teacher's scores only, the order
only) come close. Lists: SNLI star lists (premise; entailment > neutral > contradiction > another hypothesis)."""

from __future__ import annotations

from pathlib import Path

from core.reproduce.experiment import Arm, Experiment, Outcome, Row, Setup, Source, row

LISTS_PER_STEP = 16
METHOD = ("ListMLE, w = 0.5", {"w": 0.5}, 81.17)
ABLATIONS = (  # the paper's ablations: "semantic scores only" is the teacher's own order (w = 0)
    ("ListMLE, w = 0 (teacher's scores only)", {"w": 0.0}, 81.18),
    ("ListMLE, list order only", {"target": "order"}, 80.65),
)
BEFORE = 80.13  # SynCSE before post-training (avg of 7 STS tasks, BERT-base)


def _steps(quick: bool) -> int:
    return 10 if quick else 150


def arms(data: Path, setup: Setup) -> list[Arm]:
    steps = _steps(setup.quick)
    base = {"corpus": str(data / "snli.csv"), "sts_corpus": str(data / "stsb.csv"), "recipe": "listmle",
            "model": setup.model, "examples": steps * LISTS_PER_STEP, "batch_size": LISTS_PER_STEP,
            "max_steps": steps, "epochs": 1.0, "seed": 0}
    chosen = (METHOD,) if setup.quick else (METHOD, *ABLATIONS)
    return [Arm(label, {**base, **settings}) for label, settings, _ in chosen]


def rows(outcomes: dict[str, Outcome], setup: Setup) -> list[Row]:
    model = f"{setup.model_name} on STS-B test (paper: SynCSE BERT-base, average of 7 STS tasks)"
    budget = (f"{_steps(setup.quick)} steps of {LISTS_PER_STEP} lists (paper: one list per step), tau = 1, teacher "
              "= the model itself (paper: DiffCSE)")
    before = outcomes[METHOD[0]].before
    out = [row("STS Spearman before post-training", BEFORE, before, "sts_spearman", model),
           row("SNLI test lists in exact order before (%)", None, before, "ordering_accuracy", scale=100)]
    for label, _, published in (METHOD, *ABLATIONS):
        if label in outcomes:
            after = outcomes[label].after
            out += [row(f"STS Spearman after {label}", published, after, "sts_spearman", f"{model}; {budget}"),
                    row(f"SNLI test lists in exact order after {label} (%)", None, after, "ordering_accuracy",
                        budget, scale=100)]
    return out


EXPERIMENT = Experiment(
    name="listmle", title="ListMLE post-training on ranked lists", paper="seed 003: SynCSE 80.13 -> 81.17 (avg of "
    "7 STS, BERT-base); teacher's scores only 81.18, list order only 80.65",
    sources=(Source("snli.csv", "text1, text2, label (entailment / neutral / contradiction), split"),
             Source("stsb.csv", "text1, text2, score, split with test rows")), arms=arms, rows=rows)
