"""Margin trend (seed 000; docs/definitions.md, P@k and S@k): smaller TripletLoss margins keep more semantic
similarity. The `margins` reproduction (core.reproduce.margins: SST-2, all-MiniLM-L6-v2 as base and reference,
mined triplets, cosine distance, margins 0.1 and 5.0) run in this process, so the benchmark and `python -m core
reproduce margins` are one experiment with one home. The baseline is the reference model itself (before training).
Whatever comes out is printed as it is."""

from __future__ import annotations

from bench.common import Options, header, line, load_note, reproduce


def run(opts: Options) -> None:
    from core.reproduce.report import table_text

    result, arms = reproduce("margins", opts.quick)
    rows = result["rows"]
    header("margin: TripletLoss margin trend (seed 000), `python -m core reproduce margins"
           f"{' --quick' if opts.quick else ''}`", "all-MiniLM-L6-v2 on SST-2 (validation targets), 95% intervals")
    print(table_text(rows))
    small, large = rows[3], rows[5]  # S@16 after margin 0.1, after margin 5.0
    apart = small["ci_low"] > large["ci_high"] or large["ci_low"] > small["ci_high"]
    line("smaller margin keeps more S", f"{'yes' if small['ours'] > large['ours'] else 'no'} (S 0.1 - S 5.0 = "
                                        f"{small['ours'] - large['ours']:+.1f}, intervals "
                                        f"{'apart' if apart else 'overlap'}; published "
                                        f"{small['published'] - large['published']:+.1f})")
    for label, arm in arms.items():
        line(f"time, {label}", ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in arm["timings"].items()))
    line("timed", load_note() + "; the second arm reads the reference's evaluation and mined examples from the cache")
