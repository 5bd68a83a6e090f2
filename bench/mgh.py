"""Multi-granularity hard negatives with a curriculum (seed 004; docs/definitions.md, Multi-granularity hard
negatives): does the band order of the hard negative change what InfoNCE fine-tuning gives on TREC?

all-MiniLM-L6-v2 on TREC (6 classes, 500 test questions), recipe ``mgh`` (InfoNCE scale 20, in-batch negatives
plus one banded hard negative per anchor), every arm through core.training.trainer.run_training with the same
examples, seed and budget (batch 32, max_steps 100); only the band order differs: curriculum (N4 -> N1), random,
reverse (N1 -> N4), fixed:1 .. fixed:4 (the paper reports that the middle bands beat N1 or N4 alone).

Reported per arm: the model's own kNN accuracy before (the reference) and after on the test split, P@16 / S@16
after, and the mean training loss in each quarter of the steps (harder negatives give a higher loss, so the
curriculum's should step up at each quarter and the reverse's down). The mined bands' mean reference cosines are
printed once (every arm trains on the same cached rows). Differences between arms are judged against one standard
error of an accuracy on the test questions, sqrt(p(1-p)/n). Whatever comes out is printed as it is.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from bench.common import Options, data_file, header, line, load_note, ratio, set_seeds
from core.training.trainer import SilentReporter

BATCH = 32
STEPS = 100
QUICK_STEPS = 20
QUICK_TRAIN = 2000  # --quick: seeded train rows (all test rows kept)
ORDERS = ("curriculum", "random", "reverse", "fixed:1", "fixed:4")
MIDDLE = ("fixed:2", "fixed:3")  # full size only
QUARTERS = 4


class Recorder(SilentReporter):
    """Keeps the logged training losses and the last value of every progress field (the band phases)."""

    def __init__(self) -> None:
        self.losses: list[tuple[int, float]] = []
        self.fields: dict = {}

    def progress(self, **fields) -> None:
        self.fields.update(fields)

    def log_loss(self, step: int, loss: float) -> None:
        self.losses.append((step, loss))


def quarter_means(losses: list[tuple[int, float]], total: int) -> list[float]:
    """Mean logged loss per quarter of the steps; a loss logged at step s (1-based) averages the steps up to s."""
    groups: list[list[float]] = [[] for _ in range(QUARTERS)]
    for step, loss in losses:
        groups[min(QUARTERS - 1, QUARTERS * (step - 1) // max(total, 1))].append(loss)
    return [sum(g) / len(g) if g else math.nan for g in groups]


def _quick_corpus(folder: Path) -> Path:
    """--quick: QUICK_TRAIN seeded train rows and all test rows, written to a temp file."""
    import pandas as pd

    df = pd.read_csv(data_file("trec.csv"))
    train = df[df["split"] == "train"].sample(n=QUICK_TRAIN, random_state=0)
    path = folder / "trec_quick.csv"
    pd.concat([train, df[df["split"] == "test"]]).to_csv(path, index=False)
    return path


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
    from core.training.config import TrainConfig
    from core.training.trainer import run_training

    steps = QUICK_STEPS if opts.quick else STEPS
    orders = ORDERS if opts.quick else (*ORDERS, *MIDDLE)
    results: dict[str, dict] = {}
    recorders: dict[str, Recorder] = {}
    with tempfile.TemporaryDirectory(prefix="bench-mgh-") as tmp:
        tmp = Path(tmp)
        corpus = _quick_corpus(tmp) if opts.quick else data_file("trec.csv")
        for i, order in enumerate(orders):
            set_seeds()
            cfg = TrainConfig(corpus=str(corpus), recipe="mgh", order=order, examples=steps * BATCH, epochs=1.0,
                              max_steps=steps, batch_size=BATCH, seed=0, device="cpu")
            recorders[order] = Recorder()
            results[order] = run_training(cfg, recorders[order], tmp / f"run-{i}")

    first = results[orders[0]]
    before, stats = first["before"], first["examples"]
    n_test = before["n_queries"]
    header("mgh: multi-granularity hard negatives on TREC, band order (seed 004)",
           f"all-MiniLM-L6-v2 on TREC{f' (quick: {QUICK_TRAIN} train rows)' if opts.quick else ''}, recipe mgh "
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
        quarters = quarter_means(recorders[order].losses, r["steps"])
        change = (after["knn_accuracy"] - before["knn_accuracy"]) * 100
        line(order, f"kNN {after['knn_accuracy'] * 100:.1f} ({change:+.1f}), "
                    f"P/S {after['polarity']:.1f} / {after['similarity']:.1f}; loss Q1-Q4 "
                    + " ".join(f"{q:.3f}" for q in quarters)
                    + f" ({_steps_word(quarters)}); train {r['timings']['train_s']:.0f} s "
                      f"(x{ratio(r['timings']['train_s'], base_time)})")
    for order in ("curriculum", "reverse"):
        phases = recorders[order].fields.get("phases") or []
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
