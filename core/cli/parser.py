"""The command line's flags, one subparser per command."""

from __future__ import annotations

import argparse
import functools

from core.cli.common import DISCOUNT, K_PARAM, LIST_SHAPE, column_flags, corpus_args, leak_arg
from core.cli.generate import generate_args
from core.cli.training import train_args
from core.evaluation.headline import HEADLINE
from core.jobs.sweep import SEEDS
from core.reproduce import EXPERIMENTS
from core.reproduce.report import help_text as reproduction_help
from core.training.recipes import RECIPES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core", description="ContrastLab headless commands",
                                     allow_abbrev=False)
    # No abbreviated flags: `maps --k 5` was read as --kind 5 (and `--k labelled` as --kind labelled, in silence).
    sub = parser.add_subparsers(dest="command", required=True,
                                parser_class=functools.partial(argparse.ArgumentParser, allow_abbrev=False))
    ev = sub.add_parser("evaluate", help="P@k, S@k, kNN and linear-probe accuracy of a model on a labelled corpus; STS "
                        "Spearman on a pair corpus; ordering accuracy and Kendall tau on a list corpus")
    corpus_args(ev)
    leak_arg(ev)
    ev.add_argument("--reference", default=None, help="frozen reference model for S@k (default: the model itself)")
    ev.add_argument("--k", default=None, metavar="INT", help=f"{K_PARAM.help} (default {K_PARAM.default})")
    ev.add_argument(DISCOUNT.flag, default=None, metavar="linear|none", help=f"{DISCOUNT.help} (default "
                    f"{DISCOUNT.default})")
    ev.add_argument(LIST_SHAPE.flag, default=None, metavar="chain|star", help=LIST_SHAPE.help)
    ev.add_argument("--knn-metric", choices=["euclidean", "cosine"], default=None,
                    help="kNN on the model's embedding as it produces it (euclidean, the default) or cosine")
    ly = sub.add_parser("layers", help="kNN accuracy of every layer's mean-pooled hidden state; with --compare, a "
                        "run's as well and the linear CKA between the two per layer (1.0 = unchanged)")
    corpus_args(ly)
    leak_arg(ly)
    ly.add_argument("--knn-metric", choices=["cosine", "euclidean"], default="cosine")
    ly.add_argument("--compare", metavar="RUN_ID", help="a finished run whose model is compared with --model "
                    "(default: the run's reference model)")
    mp = sub.add_parser("maps", help="2-D maps of a labelled corpus (the Maps page's): the reference model's and, with "
                        "--run, the run's model's started from it; HTML, PNG and Parquet (text, label, x, y) in --out")
    corpus_args(mp)
    leak_arg(mp)
    mp.add_argument("--run", metavar="RUN_ID", help="a finished run whose fine-tuned map is drawn beside the "
                    "reference (default reference: the run's)")
    mp.add_argument("--max-points", metavar="INT", help="at most this many texts, stratified by split and label "
                    "(default: the Maps page's, 2000)")
    mp.add_argument("--method", choices=["tsne", "umap"], default="tsne")
    mp.add_argument("--out", required=True, help="folder for reference.html/.png/.parquet (and tuned.*); created "
                    "if missing, files in it replaced")
    tr = sub.add_parser("train", help="fine-tune on mined examples in a background run and evaluate before/after; "
                        "--nproc N trains over N processes (PyTorch DDP via torchrun, one GPU each where there are "
                        "GPUs)")
    train_args(tr)
    qk = sub.add_parser("quick", help="the Trade-off page's quick margin point: 256 mined triplets, one epoch, only "
                        "the top 2 layers trained from cached frozen states; a run reused when it exists")
    corpus_args(qk)
    leak_arg(qk)
    qk.add_argument("--margin", required=True, help="triplet margin (cosine distance)")
    qk.add_argument("--full", action="store_true", help="train every layer (the page's \"Retrain fully\")")
    qk.add_argument("--out", help="export the finished model into this folder")
    cr = sub.add_parser("crop", help="self-supervised fine-tuning with crop (or dropout) augmentation")
    train_args(cr, with_recipe=False)
    cr.add_argument("--augmentation", choices=[r.name for r in RECIPES.values() if r.self_supervised], default="crop")
    cr.add_argument("--batches", type=int, default=None, help="stop after this many batches")
    sw = sub.add_parser("sweep", help="train and evaluate a grid of (recipe, margin or scale) configurations")
    train_args(sw, distributed=False)
    sw.add_argument("--recipes", help="comma-separated recipes (default: --recipe)")
    sw.add_argument("--margins", required=True, help="comma-separated values of the recipe's margin or scale, "
                    "e.g. 0.01,0.1,1,5")
    sw.add_argument(SEEDS.flag, default=SEEDS.default, metavar="INT", help=SEEDS.help)
    sw.add_argument("--engine", default="local", metavar="local|ray", help="local: one configuration after another "
                    "in one background process (default); ray: each configuration a Ray task, on a local Ray instance "
                    "or the cluster at --address")
    sw.add_argument("--address", default=None, metavar="ADDRESS", help="a Ray cluster to run on with --engine ray: "
                    "auto, HOST:PORT or ray://HOST:10001 (default: start a local Ray instance)")
    rp = sub.add_parser("reproduce", help="run a seed paper's headline experiment and print each claim with the "
                        "published figure and ours (95%% CI)", description=reproduction_help(),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("name", metavar="NAME", help=f"one of: {', '.join(EXPERIMENTS)}")
    rp.add_argument("--data", required=True, metavar="DIR", help="the folder holding the experiment's files "
                    "(listed above)")
    rp.add_argument("--quick", action="store_true", help="a small budget: minutes on a CPU, not the paper's setting")
    rp.add_argument("--model", default=None, help="the model every arm trains (default all-MiniLM-L6-v2, the model "
                    "the published figures are compared with)")
    rp.add_argument("--lists-per-step", default=None, metavar="N", help="listmle: lists per optimiser step "
                    "(default 16; the paper trains 1)")
    rp.add_argument("--select-split", default=None, metavar="SPLIT", help="listmle: the split of stsb.csv whose STS "
                    "Spearman picks each arm's checkpoint, step 0 included (default validation)")
    rp.add_argument("--generator", default=None, metavar="DIR|URL", help="listmle, mgh: first write the paper's "
                    "training data with a language model, a local folder (lists by directional control) or an "
                    "OpenAI-compatible server's URL (lists step by step), and train every arm on it (default: the "
                    "substitutes the table names)")
    rp.add_argument("--generator-model", default=None, metavar="NAME", help="with --generator URL: the served model "
                    "(default: the one model the server lists)")
    rp.add_argument("--json", action="store_true")
    sv = sub.add_parser("serve", help="keep a warm worker waiting for this home's runs until Ctrl-C: a `train` or "
                        "`quick` call then starts at once instead of after a new worker's imports (6-7 s)")
    sv.add_argument("--json", action="store_true")
    rs = sub.add_parser("runs", help="list runs")
    rs.add_argument("--json", action="store_true")
    cp = sub.add_parser("compare", help="is a difference real? two runs' figures on the same test items, paired: "
                        "run B - run A with 95%% intervals and p-values (one run: after - before)")
    cp.add_argument("run_a")
    cp.add_argument("run_b", nargs="?", help="default: RUN_A's own figures before training")
    cp.add_argument("--json", action="store_true")
    ex = sub.add_parser("export", help="export a finished run's model, card, config and embeddings")
    ex.add_argument("run_id")
    ex.add_argument("--out", required=True)
    ex.add_argument("--no-embeddings", action="store_true")
    ex.add_argument("--json", action="store_true")
    generate_args(sub.add_parser("generate", help="write the data seeds 003 and 004 train on with a language model "
                                 "(a local folder or an OpenAI-compatible endpoint): ranked lists by directional "
                                 "control, or four graded hard negatives per query"))
    pb = sub.add_parser("published", help="the published figures stored with a corpus (\"published: 77.6 on this "
                        "test set\"), shown beside ours by evaluate and the pages: list them, set one or remove one")
    pb.add_argument("corpus", help="the corpus file, read as evaluate reads it (its content fingerprint is the key)")
    column_flags(pb)
    pb.add_argument("--kind", default=None, metavar="labelled|pairs|lists|negatives",
                    help="read the file as this kind of corpus (default: from the column names)")
    leak_arg(pb)
    pb.add_argument(LIST_SHAPE.flag, default=None, metavar="chain|star", help=LIST_SHAPE.help)
    pb.add_argument("--set", metavar="METRIC=VALUE", action="append", help="store a figure in the unit the pages "
                    "show it, e.g. sts_spearman=77.6, knn_accuracy=85.0 for 85%%; METRIC one of "
                    f"{', '.join(m.key for m in HEADLINE)}; repeat it to store several (--note, --unit, --k and "
                    "--discount apply to each)")
    pb.add_argument("--unit", default=None, metavar="shown|fraction", help="with --set: how VALUE is given, as "
                    "the pages show it (shown) or as a fraction of 1 (fraction: 0.85 is stored as 85.0); needed for "
                    "a value between -1 and 1 of a figure the pages show x100 or in %%")
    pb.add_argument("--note", metavar="TEXT", help="the figure's source, e.g. 'Reimers & Gurevych 2019, table 2' "
                    "(one line, at most 200 characters)")
    pb.add_argument("--k", default=None, metavar="INT", help="with --set of polarity or similarity: the k the "
                    "figure was measured at (1-1000), so it is shown beside ours at another k with that caveat")
    pb.add_argument(DISCOUNT.flag, default=None, metavar="linear|none", help="with --set of polarity or similarity: "
                    "the rank discount it was measured at (none: uniform weights, each 1/k)")
    pb.add_argument("--remove", metavar="METRIC", help="remove the stored figure of this metric")
    pb.add_argument("--json", action="store_true")
    return parser
