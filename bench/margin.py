"""Margin trend (seed 000; docs/definitions.md, P@k and S@k): smaller TripletLoss margins keep more semantic similarity.

SST-2, all-MiniLM-L6-v2 as base and reference, mined triplets, 1 epoch, batch 32, cosine distance,
margins 0.1 and 5.0, each through core.training.trainer.run_training with a no-op reporter. The baseline is the
reference model itself (before training). Whatever comes out is printed as it is.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.common import Options, data_file, header, line, set_seeds

MARGINS = (0.1, 5.0)
PUBLISHED = {0.1: (80.6, 35.2), 5.0: (81.3, 29.6)}  # P, S after 50k triplets, 5 epochs


def sst2_subset(folder: Path) -> Path:
    """--quick: 3,000 train rows (seeded) and the first 200 validation rows, written to a temp file."""
    import pandas as pd

    df = pd.read_csv(data_file("sst2.csv"))
    train = df[df["split"] == "train"].sample(n=3000, random_state=0)
    val = df[df["split"] == "validation"].head(200)
    path = folder / "sst2_quick.csv"
    pd.concat([train, val]).to_csv(path, index=False)
    return path


def run(opts: Options) -> None:
    from core.training.config import TrainConfig
    from core.training.trainer import SilentReporter, run_training

    set_seeds()
    n_examples = 300 if opts.quick else 2000
    with tempfile.TemporaryDirectory(prefix="bench-margin-") as tmp:
        tmp = Path(tmp)
        corpus = sst2_subset(tmp) if opts.quick else data_file("sst2.csv")
        results, walls = {}, {}
        for margin in MARGINS:
            set_seeds()
            cfg = TrainConfig(corpus=str(corpus), recipe="triplet", margin=margin, distance="cosine",
                              examples=n_examples, epochs=1.0, batch_size=32, seed=0, device="cpu")
            t0 = time.perf_counter()
            results[margin] = run_training(cfg, SilentReporter(), tmp / f"run-{margin}")
            walls[margin] = time.perf_counter() - t0

    before = results[MARGINS[0]]["before"]
    first = results[MARGINS[0]]
    header("margin: TripletLoss margin trend (seed 000)",
           f"all-MiniLM-L6-v2 on SST-2{' (quick subset: 3,000 train / 200 targets)' if opts.quick else ''}, "
           f"{first['examples']['examples']} mined triplets, 1 epoch, batch 32, cosine distance, "
           f"P@16 / S@16 on {before['n_queries']} targets")
    line("reference (before)  P / S", f"{before['polarity']:.1f} / {before['similarity']:.1f}")
    for margin in MARGINS:
        after = results[margin]["after"]
        line(f"margin {margin:g} (after)  P / S",
             f"{after['polarity']:.1f} / {after['similarity']:.1f}   "
             f"(dP {after['polarity'] - before['polarity']:+.1f}, dS {after['similarity'] - before['similarity']:+.1f}; "
             f"S ratio after/before {after['similarity'] / before['similarity']:.2f})")
    for margin in MARGINS:
        p, s = PUBLISHED[margin]
        line(f"published margin {margin:g}  P / S", f"{p:.1f} / {s:.1f}  (50k triplets, 5 epochs)")
    s_small, s_large = (results[m]["after"]["similarity"] for m in MARGINS)
    line("smaller margin keeps more S", f"{'yes' if s_small > s_large else 'no'} "
                                        f"(S {MARGINS[0]:g} - S {MARGINS[1]:g} = {s_small - s_large:+.1f}; "
                                        f"published {PUBLISHED[0.1][1] - PUBLISHED[5.0][1]:+.1f})")
    for margin in MARGINS:
        r = results[margin]
        tm = r["timings"]
        line(f"wall time margin {margin:g}",
             f"{walls[margin]:.0f} s (train {tm['train_s']:.0f} s, {r['steps']} steps, loss {r['train_loss']:.4f}; "
             f"eval before {tm['evaluate_before_s']:.0f} s, examples {tm['examples_s']:.0f} s, "
             f"eval after {tm['evaluate_after_s']:.0f} s)")
    line("note", "the second run reads the reference encodings and mined examples from the cache")
