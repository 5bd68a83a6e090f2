"""Multi-granularity hard negatives with a curriculum (seed 004; docs/definitions.md, Multi-granularity hard
negatives): does the band order of the hard negative change what InfoNCE fine-tuning gives on TREC?

The arms are the `mgh` reproduction's runs (core.reproduce.mgh: all-MiniLM-L6-v2 on TREC, 6 classes, 500 test
questions, recipe ``mgh``, InfoNCE scale 20, in-batch negatives plus one banded hard negative per anchor, batch 32,
the same examples and seed; only the band order differs: curriculum (N4 -> N1), random, reverse (N1 -> N4), fixed:2
and fixed:3 (the paper reports that the middle bands beat N1 or N4 alone), and at full size fixed:1 and fixed:4),
each trained and evaluated as a run through core.reproduce.job.run_arms (on the whole training split: the
reproduction's validation hold-out is its own).

Reported per arm: the model's own kNN accuracy before (the reference) and after on the test split with its 95%
interval, P@16 / S@16 after, and the mean training loss in each quarter of the steps (harder negatives give a
higher loss, so the curriculum's should step up at each quarter and the reverse's down). The mined bands' mean
reference cosines are printed once (every arm trains on the same cached rows). Differences between arms are judged
against one standard error of an accuracy on the test questions, sqrt(p(1-p)/n). Whatever comes out is printed as
it is.
"""

from __future__ import annotations

import math

from bench.common import DATA, Options, header, line, load_note, ratio, train_arms

BATCH = 32
MIDDLE = ("fixed:2", "fixed:3")  # the middle bands, which the reproduction runs at any size
QUARTERS = 4


def quarter_means(losses: list[tuple[int, float]], total: int) -> list[float]:
    """Mean logged loss per quarter of the steps; a loss logged at step s (1-based) averages the steps up to s."""
    groups: list[list[float]] = [[] for _ in range(QUARTERS)]
    for step, loss in losses:
        groups[min(QUARTERS - 1, QUARTERS * (step - 1) // max(total, 1))].append(loss)
    return [sum(g) / len(g) if g else math.nan for g in groups]


def _steps_word(values: list[float]) -> str:
    """'up, up, up' / 'down, ...': the direction of each quarter-to-quarter change."""
    return ", ".join("up" if b > a else "down" for a, b in zip(values, values[1:]))


def _rows(stats: dict) -> dict:
    """What identifies an arm's training rows: its example stats less the order, which only the schedule reads."""
    return {k: v for k, v in stats.items() if k != "order"}


def _verdict(diff: float, se: float) -> str:
    size = abs(diff)
    return "> 2 SE" if size > 2 * se else "> 1 SE" if size > se else "within 1 SE"


def run(opts: Options) -> None:
    from core.reproduce import mgh
    from core.reproduce.experiment import Setup

    arms = mgh.arms(DATA, Setup(opts.quick, "all-MiniLM-L6-v2"))  # fixed:2 and fixed:3 always, fixed:1 and 4 full
    results = train_arms(arms, by="order")
    orders = list(results)
    losses = {order: [(p["step"], p["loss"]) for p in r["run"].losses] for order, r in results.items()}

    first = results[orders[0]]
    before, stats = first["before"], first["examples"]
    n_test = before["n_queries"]
    header("mgh: multi-granularity hard negatives on TREC, band order (seed 004), `python -m core reproduce mgh"
           f"{' --quick' if opts.quick else ''}` and its runs",
           "all-MiniLM-L6-v2 on TREC, recipe mgh "
           f"(InfoNCE scale 20, in-batch + one banded hard negative), {stats['examples']} rows "
           f"({stats['anchors_used']} anchors), batch {BATCH}, {first['steps']} steps, lr 3e-5, seed 0, CPU; "
           f"kNN (k=10, the model's own metric) on {n_test} test questions")
    cos = stats["band_cosine"]
    edges = stats["edges"]
    ranks = [f"{a + 1}-{b}" for a, b in zip((0, *edges[:-1]), edges)]
    line("band mean reference cosine", ", ".join(f"N{b + 1} (ranks {r}) {c:.3f}" for b, (r, c) in
                                                 enumerate(zip(ranks, cos)))
         + f"; N1 > N2 > N3 > N4: {'yes' if all(a > b for a, b in zip(cos, cos[1:])) else 'NO'}")
    line("same training rows in every arm",
         "yes" if all(_rows(r["examples"]) == _rows(stats) for r in results.values()) else "NO")
    line("reference (before)", f"kNN {before['knn_accuracy'] * 100:.1f}, P@16 {before['polarity']:.1f}, "
                               f"S@16 {before['similarity']:.1f}")
    print("   per arm: kNN after (change from before), P@16 / S@16 after, mean training loss per quarter of the "
          "steps, train time")
    base_time = results[orders[0]]["timings"]["train_s"]
    for order in orders:
        r, after = results[order], results[order]["after"]
        quarters = quarter_means(losses[order], r["steps"])
        change = (after["knn_accuracy"] - before["knn_accuracy"]) * 100
        low, high = (v * 100 for v in after["knn_accuracy_ci"])
        line(order, f"kNN {after['knn_accuracy'] * 100:.1f} [{low:.1f}, {high:.1f}] ({change:+.1f}), "
                    f"P/S {after['polarity']:.1f} / {after['similarity']:.1f}; loss Q1-Q4 "
                    + " ".join(f"{q:.3f}" for q in quarters)
                    + f" ({_steps_word(quarters)}); train {r['timings']['train_s']:.0f} s "
                      f"(x{ratio(r['timings']['train_s'], base_time)})")
    for order in ("curriculum", "reverse"):
        phases = results[order]["run"].progress.get("phases") or []
        line(f"{order}: band boundaries (loss curve)", ", ".join(f"{p['label']} from step {p['step']}" for p in phases))

    p = results["curriculum"]["after"]["knn_accuracy"]
    se = math.sqrt(p * (1 - p) / n_test) * 100
    print(f"   one standard error of an accuracy on {n_test} questions at p = {p * 100:.1f} (curriculum after): "
          f"{se:.2f} points (2 SE {2 * se:.2f})")
    line("change from before, curriculum", f"{(p - before['knn_accuracy']) * 100:+.1f} "
                                           f"({_verdict((p - before['knn_accuracy']) * 100, se)})")
    for order in orders[1:]:
        diff = (results[order]["after"]["knn_accuracy"] - p) * 100
        line(f"{order} - curriculum", f"{diff:+.1f} points ({_verdict(diff, se)})")
    if not opts.quick:
        best_mid = max(results[o]["after"]["knn_accuracy"] for o in MIDDLE)
        best_end = max(results[o]["after"]["knn_accuracy"] for o in ("fixed:1", "fixed:4"))
        line("middle bands beat N1 / N4 alone", f"{'yes' if best_mid > best_end else 'no'} (best of fixed:2/3 "
                                                f"minus best of fixed:1/4: {(best_mid - best_end) * 100:+.1f} points, "
                                                f"{_verdict((best_mid - best_end) * 100, se)})")
    line("timed", f"trainer.train() wall time per arm (ratio to the first arm); arms run one after another, "
                  f"{load_note()}")
