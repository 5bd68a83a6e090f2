"""ListMLE post-training (seed 003; docs/definitions.md, ListMLE post-training): does nudging a teacher's
similarities toward the list order (Algorithm 1) teach all-MiniLM-L6-v2 that order, and what does it cost general
similarity?

The arms are the `listmle` reproduction's run (core.reproduce.listmle: SNLI validation star lists train, premise;
entailment > neutral > contradiction > another premise's hypothesis, anchor 0 only; SNLI test lists and STS-B test
scored, teacher = the model itself) over a grid: tau in {1, 0.05} x w in {0.5, 0.7} x {1, 16} lists per step, and at
w = 0.7 and 16 lists per step each tau again with the anchor's own similarity first in its list (Eq. 8 as written;
off by default), each a run trained and evaluated through core.reproduce.job.run_arms on the same lists, seed and
number of steps. The
baseline is the base model (before training); each arm's change is paired over the same test items. Which tau does
not hurt decides the recipe's default (docs/definitions.md, ListMLE post-training). Whatever comes out is printed as
it is, each figure with its 95% interval.
"""

from __future__ import annotations

from bench.common import DATA, Options, header, line, load_note, ratio, train_arms

STEPS = 30  # optimiser steps per arm, whatever the lists per step (Adam's drift is per step)
QUICK_STEPS = 4
WS = (0.5, 0.7)
TAUS = (1.0, 0.05)
PER_STEP = (1, 16)  # the paper's one list per step, and the reproduction's default


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
    base = {k: v for k, v in method.items() if k != "select_split"}  # the end of training, not a chosen checkpoint
    arms = [Arm(f"tau = {tau:g}, w = {w:g}, {n} list{'s' if n > 1 else ''}/step",
                {**base, "w": w, "tau": tau, "batch_size": n, "max_steps": steps, "examples": steps * n})
            for tau in TAUS for w in WS for n in PER_STEP]
    n = PER_STEP[-1]  # Eq. 8 with each anchor's own similarity first in its list, beside the same arms without it
    arms += [Arm(f"tau = {tau:g}, w = 0.7, {n} lists/step, anchor in its list",
                 {**base, "w": 0.7, "tau": tau, "batch_size": n, "max_steps": steps, "examples": steps * n,
                  "anchor_in_list": True}) for tau in TAUS]
    results = train_arms(arms)
    first = results[arms[0].label]
    header("listmle: ListMLE post-training on SNLI star lists (seed 003, Algorithm 1), ordering on SNLI test lists "
           "and STS-B test Spearman, 95% intervals; paired change against the base model",
           f"all-MiniLM-L6-v2 as student and teacher, {steps} steps per arm of 1 or 16 lists, lr 3e-5, seed 0, CPU; "
           f"{first['before'].get('n_lists')} SNLI test lists; the model at the last step (no checkpoint chosen)")
    before = first["before"]
    line("base model (no training)", f"order {_cell(before, 'ordering_accuracy', 100)} %, tau "
                                     f"{before.get('kendall_tau', float('nan')):.3f}, "
                                     f"STS {_cell(before, 'sts_spearman')}")
    train_first = first.get("timings", {}).get("train_s", 0.0)
    for label, s in results.items():
        after = s["after"]
        train_s = s.get("timings", {}).get("train_s", 0.0)
        stats = s.get("examples", {})
        line(label, f"order {_cell(after, 'ordering_accuracy', 100)} % ({_change(before, after, 'ordering_accuracy')}"
                    f"), tau {after.get('kendall_tau', 0):.3f}, STS {_cell(after, 'sts_spearman')} "
                    f"({_change(before, after, 'sts_spearman')}); target in list order "
                    f"{stats.get('target_in_order', float('nan')):.1%}; train {train_s:.0f} s "
                    f"(x{ratio(train_s, train_first)}), loss {s.get('train_loss', float('nan')):.4f}")
    line("teacher already in list order", f"{first.get('examples', {}).get('teacher_in_order', 0):.1%} of "
                                          "the training lists (anchor row strictly decreasing)")
    line("published (seed 003)", listmle.EXPERIMENT.paper)
    line("timed", "each arm's trainer.train() wall time; ratios to the first arm's; arms one after another, "
         + load_note())


def _change(before: dict, after: dict, key: str) -> str:
    """after - before of one figure, paired over the same test items, as the pages show it."""
    from core.evaluation.paired import change_texts

    return change_texts(before, after).get(key, "not compared")
