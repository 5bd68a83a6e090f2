"""ListMLE post-training (seed 003; docs/definitions.md, ListMLE post-training): does nudging a teacher's
similarities toward the list order (Algorithm 1) teach all-MiniLM-L6-v2 that order, and what does it cost general
similarity?

The arms are the `listmle` reproduction's run (core.reproduce.listmle: SNLI validation star lists train, premise;
entailment > neutral > contradiction > another premise's hypothesis, anchor 0 only; SNLI test lists and STS-B test
scored, teacher = the model itself) with the nudge w and the temperature tau varied, plus the paper's order-only
ablation, each a run trained and evaluated through core.reproduce.job.run_arms on the same lists, seed and budget.
The baseline is the base model (before training) and the w = 0 arm (the teacher's own order). Whatever comes out is
printed as it is, each figure with its 95% interval.
"""

from __future__ import annotations

from bench.common import DATA, Options, header, line, load_note, ratio, train_arms

STEPS = 30  # optimiser steps of 16 lists per arm (the reproduction's full budget is 150; 9 arms of it take ~1.5 h)
QUICK_STEPS = 4
WS = (0.0, 0.5, 0.7, 2.0)
TAUS = (1.0, 0.05)


def _cell(metrics: dict, key: str, scale: float = 1.0, digits: int = 1) -> str:
    from core.reproduce.experiment import figure

    value, low, high = figure(metrics, key, scale)
    if value is None:
        return "-"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]" if low is not None else f"{value:.{digits}f}"


def run(opts: Options) -> None:
    from core.reproduce import listmle
    from core.reproduce.experiment import Arm, Setup

    steps = QUICK_STEPS if opts.quick else STEPS
    method = listmle.arms(DATA, Setup(False, "all-MiniLM-L6-v2"))[0].config
    base = {**method, "max_steps": steps, "examples": steps * listmle.LISTS_PER_STEP}
    arms = [Arm(f"w = {w:g}, tau = {tau:g}", {**base, "w": w, "tau": tau}) for tau in TAUS for w in WS]
    arms.append(Arm("list order only, tau = 1", {**base, "target": "order", "tau": 1.0}))
    results = train_arms(arms)
    first = results[arms[0].label]
    header("listmle: ListMLE post-training on SNLI star lists (seed 003, Algorithm 1), ordering on SNLI test lists "
           "and STS-B test Spearman, 95% intervals",
           f"all-MiniLM-L6-v2 as student and teacher, {steps} steps of {listmle.LISTS_PER_STEP} lists per arm, "
           f"lr 3e-5, seed 0, CPU; {first['before'].get('n_lists')} SNLI test lists")
    before = first["before"]
    line("base model (no training)", f"order {_cell(before, 'ordering_accuracy', 100)} %, tau "
                                     f"{before.get('kendall_tau', float('nan')):.3f}, "
                                     f"STS {_cell(before, 'sts_spearman')}")
    train_first = first.get("timings", {}).get("train_s", 0.0)
    for label, s in results.items():
        after = s["after"]
        train_s = s.get("timings", {}).get("train_s", 0.0)
        stats = s.get("examples", {})
        line(label, f"order {_cell(after, 'ordering_accuracy', 100)} %, tau {after.get('kendall_tau', 0):.3f}, "
                    f"STS {_cell(after, 'sts_spearman')}; target in list order "
                    f"{stats.get('target_in_order', float('nan')):.1%}; train {train_s:.0f} s "
                    f"(x{ratio(train_s, train_first)}), loss {s.get('train_loss', float('nan')):.4f}")
    line("teacher already in list order", f"{first.get('examples', {}).get('teacher_in_order', 0):.1%} of "
                                          "the training lists (anchor row strictly decreasing)")
    line("published (seed 003)", listmle.EXPERIMENT.paper)
    line("timed", "each arm's trainer.train() wall time; arms one after another, " + load_note())
