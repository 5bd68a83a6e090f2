"""`python -m core generate lists|negatives SOURCE (--model DIR | --endpoint URL --model NAME) --out FILE`: the
data seeds 003 and 004 train on, written by a language model in this process, with a progress bar (items, tokens/s,
ETA). Ctrl-C (or SIGTERM) stops starting new items, writes the finished ones and exits 130; a rerun reuses every
finished item from the cache (core.generation.items)."""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from pathlib import Path

from core.errors import Cancelled, UserError, shorten
from core.training.eta import fmt_seconds

KINDS = ("lists", "negatives")


def generate_args(parser: argparse.ArgumentParser) -> None:
    from core.generation.lists import DEFAULT_LAMBDA, DEFAULT_STEPS, METHODS
    from core.generation.negatives import CLARITIES, DIFFICULTIES, QUERY_LENGTHS, QUERY_TYPES

    parser.add_argument("kind", metavar="lists|negatives", help="ranked lists (seed 003) or graded hard negatives "
                        "(seed 004)")
    parser.add_argument("source", help="lists: a file of sentences (a text column); negatives: a file of query "
                        "rows, with a positive column or without (the model then writes the positive too)")
    parser.add_argument("--model", help="a local causal LM folder, or with --endpoint the served model's name")
    parser.add_argument("--endpoint", metavar="URL", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1 "
                        "(vLLM, llama.cpp, Ollama); its key, if any, is read from OPENAI_API_KEY only")
    parser.add_argument("--out", required=True, help="the file to write (.csv or .parquet), with FILE.generation.json "
                        "beside it recording how it was made")
    parser.add_argument("--method", default="directional", metavar="|".join(METHODS), help="lists: directional "
                        "control (a local model), step by step (λ = 0) or the whole list from one prompt")
    parser.add_argument("--lambda", dest="lam", default=str(DEFAULT_LAMBDA), metavar="FLOAT",
                        help=f"lists: directional control's λ (default {DEFAULT_LAMBDA})")
    parser.add_argument("--steps", default=str(DEFAULT_STEPS), metavar="INT",
                        help=f"lists: sentences after the source (default {DEFAULT_STEPS})")
    parser.add_argument("--query-type", default="common", metavar="|".join(QUERY_TYPES), help="negatives: the prompt's "
                        "query type")
    parser.add_argument("--query-length", default="5 to 15 words", metavar="|".join(QUERY_LENGTHS))
    parser.add_argument("--difficulty", default="college", metavar="|".join(DIFFICULTIES))
    parser.add_argument("--clarity", default="clear", metavar="|".join(CLARITIES))
    parser.add_argument("--document-words", default="100", metavar="INT", help="negatives: each document's length "
                        "the prompt asks for")
    parser.add_argument("--attempts", default="3", metavar="INT", help="negatives: tries per row before a malformed "
                        "answer counts as a failure")
    parser.add_argument("--concurrency", default="4", metavar="INT", help="requests at once to an endpoint (a local "
                        "model answers one at a time)")
    parser.add_argument("--seed", default="0", metavar="INT")
    parser.add_argument("--limit", default=None, metavar="INT", help="only the first INT source items")
    parser.add_argument("--text-col", default=None, metavar="STR", help="lists: the source's text column")
    parser.add_argument("--query-col", default=None, metavar="STR")
    parser.add_argument("--positive-col", default=None, metavar="STR")
    parser.add_argument("--check-against", default=None, metavar="CORPUS", help="a corpus you will evaluate on: "
                        "count the written texts that repeat one of its test texts (case, accents and spacing "
                        "aside), in the output and the sidecar")
    parser.add_argument("--device", default=None, help="a local model's device (default: CUDA > MPS > CPU)")
    parser.add_argument("--json", action="store_true")


def _whole(value: str | None, flag: str, low: int = 0) -> int | None:
    if value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise UserError(f"{flag} must be a whole number, got {shorten(value)}.") from None
    if number < low:
        raise UserError(f"{flag} must be at least {low}, got {number}.")
    return number


def _real(value: str, flag: str) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise UserError(f"{flag} must be a number, got {shorten(value)}.") from None
    if not math.isfinite(number):
        raise UserError(f"{flag} must be a finite number, got {shorten(value)}.")
    return number


def _settings(args):
    from core.generation.lists import ListSettings
    from core.generation.negatives import NegativeSettings

    if args.kind == "lists":
        return ListSettings(method=args.method, lam=_real(args.lam, "--lambda"), steps=_whole(args.steps, "--steps"))
    return NegativeSettings(query_type=args.query_type, query_length=args.query_length, difficulty=args.difficulty,
                            clarity=args.clarity, document_words=_whole(args.document_words, "--document-words"),
                            attempts=_whole(args.attempts, "--attempts"))


def cmd_generate(args) -> dict:
    from tqdm import tqdm

    from core.generation.engines import engine_for
    from core.generation.run import generate

    if args.kind not in KINDS:
        raise UserError(f"generate makes lists or negatives, got {shorten(args.kind)}.")
    settings = _settings(args)  # every flag checked before a model is loaded or a server contacted
    seed, concurrency = _whole(args.seed, "--seed"), _whole(args.concurrency, "--concurrency", 1)
    limit = _whole(args.limit, "--limit", 1)
    source, out = Path(args.source), Path(args.out)
    if not source.is_file():
        raise UserError(f"Source file {source} does not exist; check the path.")
    engine = engine_for(args.model, args.endpoint, args.device)
    stop = threading.Event()
    bar = tqdm(total=None, unit="item", file=sys.stderr, disable=args.json and not sys.stderr.isatty())

    def progress(tally) -> None:
        _per_s, tokens_s, left = tally.rates(time.monotonic())
        bar.total, bar.n = tally.total, tally.done
        bar.set_postfix_str(f"{tokens_s:.0f} tokens/s, ETA {fmt_seconds(left)}, {tally.cached} from the cache")

    previous = _stop_on_signals(stop)
    try:
        outcome = generate(args.kind, engine, source, out, settings, seed=seed, concurrency=concurrency, limit=limit,
                           columns={"text_col": args.text_col, "query_col": args.query_col,
                                    "positive_col": args.positive_col},
                           progress=progress, should_stop=stop.is_set,
                           check_against={"corpus": args.check_against} if args.check_against else None)
    except Cancelled:
        return {"status": "cancelled", "out": None, "note": "stopped before any finished item passed its checks; "
                "the finished ones are cached, so a rerun starts from them"}
    finally:
        previous()
        bar.close()
    record = json.loads(outcome.sidecar.read_text(encoding="utf-8"))
    return {"status": "cancelled" if outcome.cancelled else "done", "kind": args.kind, "out": str(out),
            "sidecar": str(outcome.sidecar), "counts": record["counts"], "generator": record["generator"],
            "settings": record["settings"], "seconds": round(outcome.seconds, 2)}


def _stop_on_signals(stop: threading.Event):
    """Ctrl-C and SIGTERM set `stop` (a second Ctrl-C interrupts at once); returns what restores the handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def first(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nstopping: the items under way finish and are kept (Ctrl-C again to quit at once)", file=sys.stderr)

    old = {sig: signal.signal(sig, first) for sig in (signal.SIGINT, signal.SIGTERM)}
    return lambda: [signal.signal(sig, handler) for sig, handler in old.items()]


def print_generate(result: dict) -> None:
    from core.data.provenance import generator_text

    if result.get("out") is None:
        print(f"generation {result['status']}: {result['note']}")
        return
    counts = result["counts"]
    made = (f"{counts['lists']} lists, {counts['sentences']} sentences" if result["kind"] == "lists"
            else f"{counts['rows']} rows of negatives")
    dropped = ", ".join(f"{n} {why}" for why, n in counts.get("dropped", {}).items() if n) or "none"
    print(f"generation {result['status']}: {made} from {counts['finished']} of {counts['source_items']} source items "
          f"in {result['seconds']} s, written by {generator_text(result['generator'])}")
    print(f"dropped: {dropped}")
    if "leakage" in counts:
        leak = counts["leakage"]
        shown = f" (e.g. {', '.join(map(repr, leak['examples'][:3]))})" if leak["leaked"] else ""
        print(f"leakage: {leak['leaked']:,} of {leak['of']:,} written texts are test texts of {leak['corpus']}{shown}")
    if counts.get("ended_early"):
        print("chains ended early: " + ", ".join(f"{n} {why}" for why, n in counts["ended_early"].items()))
    print(f"wrote {result['out']} and {result['sidecar']}")
