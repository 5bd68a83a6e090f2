"""Headless CLI: the same code paths as the pages, progress bars on stderr, results on stdout.

Every user error prints one line to stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from core.errors import UserError

EXIT_USER_ERROR = 2


class TqdmPhases:
    """A PhaseProgress that opens one tqdm bar per phase label on stderr."""

    def __init__(self) -> None:
        self.label: str | None = None
        self.bar = None

    def __call__(self, label: str, done: int, total: int) -> None:
        from tqdm import tqdm

        if label != self.label:
            self.close()
            self.label = label
            self.bar = tqdm(total=total, desc=label, file=sys.stderr, leave=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.bar, self.label = None, None


def _corpus_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus", help="CSV / TSV / JSONL / Parquet file with a text and a label column")
    p.add_argument("--text-col")
    p.add_argument("--label-col")
    p.add_argument("--split-col")
    p.add_argument("--model", default=None, help="local directory, packaged name or hub id (default all-MiniLM-L6-v2)")
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: best available)")
    p.add_argument("--knn-metric", choices=["euclidean", "cosine"], default="euclidean")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _load_corpus(args):
    from core.corpus import load_corpus

    return load_corpus(args.corpus, text_col=args.text_col, label_col=args.label_col, split_col=args.split_col)


def cmd_evaluate(args) -> dict:
    from core.evaluate import EvalSettings, evaluate
    from core.models import load_model

    corpus = _load_corpus(args)
    model = load_model(args.model, args.device)
    reference = model if args.reference in (None, args.model) else load_model(args.reference, args.device)
    settings = EvalSettings(k=args.k, knn_metric=args.knn_metric)
    bars = TqdmPhases()
    try:
        result = evaluate(model, reference, corpus, settings, progress=bars, model_name=args.model or "all-MiniLM-L6-v2")
    finally:
        bars.close()
    result["reference"] = args.reference or result["model"]
    result["targets"] = corpus.target_split
    return result


def cmd_layers(args) -> dict:
    from core.evaluate import EvalSettings, evaluate_layers
    from core.models import load_model

    corpus = _load_corpus(args)
    model = load_model(args.model, args.device)
    bars = TqdmPhases()
    try:
        layers = evaluate_layers(model, corpus, EvalSettings(knn_metric=args.knn_metric), progress=bars)
    finally:
        bars.close()
    return {"model": args.model or "all-MiniLM-L6-v2", "layers": layers}


def _print_evaluate(r: dict) -> None:
    print(f"model {r['model']}  (S judged by {r['reference']}; targets: {r['targets']}, n={r['n_queries']}, pool={r['n_pool']})")
    print(f"P@{r['k']} {r['polarity']:.1f} (sd {r['polarity_sd']:.1f})   S@{r['k']} {r['similarity']:.1f} (sd {r['similarity_sd']:.1f})")
    print(f"kNN accuracy {r['knn_accuracy']:.3f} (n_train={r['n_knn_train']})   linear probe {r.get('linear_accuracy', float('nan')):.3f}")


def _print_layers(r: dict) -> None:
    print(f"model {r['model']}")
    for row in r["layers"]:
        print(f"layer {row['layer']:>2}  kNN accuracy {row['knn_accuracy']:.3f}")


COMMANDS: dict[str, tuple[Callable, Callable]] = {
    "evaluate": (cmd_evaluate, _print_evaluate),
    "layers": (cmd_layers, _print_layers),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core", description="ContrastLab headless commands")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="P@k, S@k, kNN and linear-probe accuracy of a model on a corpus")
    _corpus_args(ev)
    ev.add_argument("--reference", default=None, help="frozen reference model for S@k (default: the model itself)")
    ev.add_argument("--k", type=int, default=16)
    ly = sub.add_parser("layers", help="kNN accuracy of every layer's mean-pooled hidden state")
    _corpus_args(ly)
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.models import setup_offline

    setup_offline()
    args = build_parser().parse_args(argv)
    run, show = COMMANDS[args.command]
    try:
        result = run(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    if args.json:
        print(json.dumps(result))
    else:
        show(result)
    return 0
