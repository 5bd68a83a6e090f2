"""`python -m bench [NAME ...] [--quick]`: run the named benchmarks (default: all), one after another."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time

from bench.common import Options, quiet_libraries

BENCHMARKS = {
    "reference": "seed 000 Table 1 reference row: P@16 / S@16 of all-MiniLM-L6-v2 on SST-2 vs published, 2 discounts",
    "layerwise": "one-pass layer-wise encoding vs one forward pass per layer",
    "throughput": "core.models.encode.encode vs SentenceTransformer.encode; FAISS kNN vs numpy brute force",
    "overhead": "our training path vs a bare SentenceTransformerTrainer",
    "margin": "TripletLoss margin 0.1 vs 5.0 on SST-2 (seed 000 trend): the `margins` reproduction, 95% intervals",
    "crops": "crop pairs vs dropout pairs, all-MiniLM-L6-v2 fine-tuned on BBC News (seed 002): the crops "
             "reproduction, kNN with 95% intervals and training time",
    "pages": "the app in Chromium: quick margin point, cached page switches vs first visits",
    "raoe": "CoSENT, AnglE and RAOE ablations on STS-B and SNLI (seed 001): the raoe reproduction, STS-B test "
            "Spearman with 95% intervals, training time and the loss's own cost",
    "listmle": "ListMLE post-training on SNLI star lists (seed 003, Algorithm 1): w x tau grid and order only, "
               "ordering and STS-B Spearman with 95% intervals",
    "mgh": "multi-granularity hard negatives on TREC (seed 004): the mgh reproduction's band orders curriculum / "
           "random / reverse / fixed:K",
    "ata": "ATA vs mean and CLS pooling (seed 004): zero-shot and fine-tuned STS-B test Spearman, training time",
    "maps": "both t-SNE maps (reference, aligned) vs openTSNE's defaults, quality beside; UMAP's numba cache cold/warm",
    "quick": "quick margin point: top-2 layers from cached frozen states vs every layer (speed on the demo corpus, "
             "fidelity on SST-2)",
    "cli_run": "a CLI session on 20,000 SST-2 texts: evaluate, a 320-triplet train (phases and overhead), layers "
               "--compare, two quick points, the train again beside `serve`, and a cold quick point on the demo "
               "corpus, each against a plain SentenceTransformer.encode of the texts",
    "layer_change": "linear CKA per layer after a triplet run on SST-2 and a crop run on BBC News (seed 002)",
    "scale": "a 96k-row corpus end to end: seconds and peak RSS per phase, report time, streamed encode vs ST.encode",
    "server": "the app on TREC: server CPU while a run trains, step time app open vs CLI, issue 13's walk re-timed",
    "ddp": "a run over 2 processes (torchrun DDP, gloo, 1 thread each) vs 1 process on the same examples: steps/s, "
           "wall time, final loss",
    "sweep_engines": "a 4-margin sweep on the demo corpus: engine local (one after another) vs Ray local with 2 "
                     "workers (torch 1 thread each), wall time and metrics per margin",
    "generate": "generation (seed 003 lists, seed 004 negatives' engines): directional vs stepwise tokens/s on a tiny "
                "Llama, our chat vs plain generate, an endpoint at concurrency 4 vs 1",
    "per_row": "per-row costs for docs/scaling.md: encode texts/s (one process vs ST pool), FAISS flat/IVF/HNSW "
               "ms/query and recall@10, t-SNE/UMAP out-of-sample placement, Parquet",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     epilog="benchmarks: " + "; ".join(f"{k}: {v}" for k, v in BENCHMARKS.items()))
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {', '.join(BENCHMARKS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes: the whole suite in a few minutes")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads for both arms (default: torch's own choice); 1 is steadier "
                             "on a machine whose cores are busy with other work")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where the model runs in the benchmarks that take it (throughput); default cpu")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    names = args.names or list(BENCHMARKS)
    quiet_libraries()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no CUDA device on this machine")
    opts = Options(quick=args.quick, device=args.device)
    failed = []
    for i, name in enumerate(names):
        if i:
            print()
        # A fresh ContrastLab home per benchmark: no embedding or example cache carries over from earlier
        # runs (or from another benchmark), and nothing is written to the user's home.
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-home-") as home:
            os.environ["CONTRASTLAB_HOME"] = home
            t0 = time.perf_counter()
            try:
                importlib.import_module(f"bench.{name}").run(opts)
            except Exception as exc:  # report and go on with the next benchmark
                import traceback

                traceback.print_exc()
                print(f"== {name}: FAILED ({type(exc).__name__}: {exc}) ==")
                failed.append(name)
            print(f"   [{name}{' --quick' if opts.quick else ''}: {time.perf_counter() - t0:.0f} s]")
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
