"""Headless CLI: the same code paths as the pages, progress bars on stderr, results on stdout.

Every user error prints one line to stderr and exits with status 2.

Corpus reading, evaluation and export are imported inside the commands that use them: they load pandas,
scikit-learn or torch, and `python -m core runs` or a bad flag should answer at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from tqdm import tqdm

from core.errors import UserError, shorten
from core.evaluation.headline import HEADLINE
from core.jobs import ddp, launch
from core.jobs.sweep import SEEDS, cancel, check_engine, sweep_config
from core.models.loading import DEFAULT_MODEL, load_model, resolve_model, setup_offline
from core.reproduce import EXPERIMENTS
from core.reproduce.report import help_text as reproduction_help
from core.reproduce.report import table_text
from core.runs.labels import knob_value, shown_text
from core.runs.store import PARENT_KINDS, RunStore
from core.training.config import GENERAL, GENERAL_PARAMS, TrainConfig, for_recipe
from core.training.eta import fmt_seconds
from core.training.params import Param
from core.training.raoe import self_distillation_note, teacher_names
from core.training.recipes import RECIPES, get_recipe, recipe_params

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by Ctrl-C (128 + SIGINT)
K_PARAM = dataclasses.replace(GENERAL_PARAMS["eval_k"], name="k")  # evaluate --k: a run's eval_k, by its flag's name
DISCOUNT = GENERAL_PARAMS["discount"]  # evaluate --discount: a run's, by the same name
LIST_SHAPE = GENERAL_PARAMS["list_shape"]  # evaluate --list-shape: a run's, by the same name
DROP_LEAKED_HELP = GENERAL_PARAMS["drop_leaked"].help  # --drop-leaked of the commands without a run's flags


class TqdmPhases:
    """A PhaseProgress that opens one tqdm bar per phase label on stderr."""

    def __init__(self) -> None:
        self.label: str | None = None
        self.bar = None

    def __call__(self, label: str, done: int, total: int) -> None:
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
    p.add_argument("corpus", help="CSV / TSV / JSONL / Parquet file: labelled texts (text, label), pairs (text1, "
                   "text2, score or label) or ranked lists (list_id, rank, text)")
    p.add_argument("--text-col")
    p.add_argument("--label-col")
    p.add_argument("--split-col")
    p.add_argument("--kind", default=None, metavar="labelled|pairs|lists", help="read the file as this kind of "
                   "corpus whatever its column names suggest, e.g. --kind labelled --text-col text1 --label-col score "
                   "(default: from the column names)")
    p.add_argument("--model", default=None, help="local directory, packaged name or hub id (default all-MiniLM-L6-v2)")
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: best available)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _leak_arg(p: argparse.ArgumentParser) -> None:
    """--drop-leaked, for the commands that read the corpus in this process (a run's worker reads its config)."""
    p.add_argument("--drop-leaked", action="store_true", help=DROP_LEAKED_HELP)


def _warn(corpus) -> None:
    """The corpus report's warnings (Latin-1 fallback, long texts, duplicates, unused split values) on stderr, as
    the Corpus page shows them: a headless run must not change what it reads without saying so either. Leakage,
    of every corpus kind, is said here, in the CLI's words (the page offers a checkbox): the target items that are
    also training items, then (pairs and lists) those that only share a text with training items."""
    for warning in corpus.report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    report = corpus.report
    if report.leaked:
        what = f"{corpus.leakage()} (e.g. {', '.join(map(_quoted, report.leaked_examples))})"
        if report.leaked_dropped:
            print(f"warning: {what}; dropped from the {corpus.target_split} split (--drop-leaked).", file=sys.stderr)
        else:
            print(f"warning: {what}, so a model can score them by memory; --drop-leaked drops them.", file=sys.stderr)
    sharing = corpus.sharing() if corpus.kind != "labelled" else ""
    if sharing:
        others = report.shared - report.leaked
        scope = (f"only the {report.leaked:,} exact repeat{'s' if report.leaked > 1 else ''}, not the {others:,} "
                 f"other{'s' if others > 1 else ''}" if report.leaked
                 else "only exact repeats, of which there are none")
        print(f"warning: {sharing} (e.g. {', '.join(map(_quoted, report.shared_examples))}), so a model may score "
              f"them partly by memory; --drop-leaked drops {scope}.", file=sys.stderr)


def _quoted(example) -> str:
    """A leaked text, or a leaked pair as 'text1' / 'text2', quoted and cut to one line."""
    return shorten(example, 60) if isinstance(example, str) else " / ".join(shorten(t, 40) for t in example)


def _kind(args) -> str:
    """The corpus kind `args.corpus` is read as: --kind when given (checked), else the one its columns say."""
    from core.data.kinds import checked_kind, corpus_kind

    return checked_kind(args.kind) or corpus_kind(args.corpus)


def _kind_words(args, kind: str) -> str:
    """"data.csv is a pair corpus (...)", or "--kind pairs reads data.csv as a pair corpus (...)" when forced."""
    from core.data.kinds import KIND_NAMES

    if args.kind:
        return f"--kind {kind} reads {args.corpus} as {KIND_NAMES[kind]}"
    return f"{args.corpus} is {KIND_NAMES[kind]}"


def _load_labelled(args, why: str):
    """The labelled corpus `args.corpus` holds; a pair or list file is refused whatever columns are named (naming
    a --label-col must not turn a list's rank into a class). `why` says what needs the labels."""
    from core.data.corpus import load_corpus
    from core.data.kinds import KIND_NAMES

    kind = _kind(args)
    if kind != "labelled":
        raise UserError(f"{why}, so they need {KIND_NAMES['labelled']}; {_kind_words(args, kind)}.")
    corpus = load_corpus(args.corpus, text_col=args.text_col, label_col=args.label_col, split_col=args.split_col,
                         drop_leaked=args.drop_leaked)
    _warn(corpus)
    return corpus


def cmd_evaluate(args) -> dict:
    """The reference evaluation of any corpus kind (core.evaluation.corpus_eval): P@k / S@k / kNN of labelled texts,
    STS Spearman of pairs, ordering of lists."""
    from core.data.kinds import KIND_NAMES, load_any
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.evaluation.evaluate import EvalSettings

    k = K_PARAM.parse(args.k)
    discount = DISCOUNT.parse(args.discount)
    kind = _kind(args)
    shape = LIST_SHAPE.parse(LIST_SHAPE.default if args.list_shape is None else args.list_shape)
    if kind != "lists" and args.list_shape is not None:
        raise UserError(f"--list-shape says what the order of {KIND_NAMES['lists']} states; "
                        f"{_kind_words(args, kind)}, so leave the flag out.")
    corpus = load_any(args.corpus, text_col=args.text_col, label_col=args.label_col, split_col=args.split_col,
                      drop_leaked=args.drop_leaked, list_shape=shape, kind=kind)
    _warn(corpus)
    model = load_model(args.model, args.device)
    labelled = kind == "labelled"
    reference = model if not labelled or args.reference in (None, args.model) else load_model(args.reference,
                                                                                             args.device)
    settings = EvalSettings(k=k, discount=discount, knn_metric=args.knn_metric)
    bars = TqdmPhases()
    try:
        result = evaluate_corpus(model, reference, corpus, settings, progress=bars,
                                 model_name=args.model or "all-MiniLM-L6-v2")
    finally:
        bars.close()
    if labelled:
        result["reference"] = args.reference or result["model"]
        result["targets"] = corpus.target_split
    _warn_interval(result)
    from core.evaluation.published import published_values

    published = published_values(corpus.fingerprint, warn=_warn_line)  # stored with the corpus: `published`
    return {**result, "published": published} if published else result


def _warn_line(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _published_text(r: dict, key: str, share: bool = False) -> str:
    """" (published: 77.6)" beside a figure of evaluate's printout when the corpus has one stored, else ""; `share`:
    an accuracy as the line prints it, a share with 3 decimals ("0.912"), not as the cards do ("91.2%")."""
    value = (r.get("published") or {}).get(key)
    if value is None:
        return ""
    shown = f"{value:.3f}" if share else next(m for m in HEADLINE if m.key == key).text(value)
    return f" (published: {shown})"


def cmd_published(args) -> dict:
    """The published figures stored with a corpus (core.evaluation.published), by its fingerprint: listed, or one
    set (--set METRIC=VALUE in the shown unit, --note its source) or removed (--remove METRIC)."""
    from core.data.kinds import load_any
    from core.evaluation.published import (checked_metric, checked_note, checked_value, published,
                                           remove_published, set_published)

    if args.set is not None and args.remove is not None:
        raise UserError("Give --set or --remove, not both.")
    if args.note is not None and args.set is None:
        raise UserError("--note is the source of a figure you --set METRIC=VALUE; give it with --set.")
    if args.set is not None:  # checked before the corpus is read: a bad value answers at once
        if "=" not in args.set:
            raise UserError(f"--set takes METRIC=VALUE, e.g. --set sts_spearman=77.6; got {shorten(args.set)}.")
        key, value = (part.strip() for part in args.set.split("=", 1))
        checked_value(key, value)
        checked_note(args.note)
    elif args.remove is not None:
        checked_metric(args.remove)
    kind = _kind(args)
    shape = LIST_SHAPE.parse(LIST_SHAPE.default if args.list_shape is None else args.list_shape)
    corpus = load_any(args.corpus, text_col=args.text_col, label_col=args.label_col, split_col=args.split_col,
                      drop_leaked=args.drop_leaked, list_shape=shape, kind=kind)
    action = None
    if args.set is not None:
        action = {"set": set_published(corpus.fingerprint, key, value, args.note, kind=corpus.kind,
                                       warn=_warn_line).label()}
    elif args.remove is not None:
        action = {"removed": remove_published(corpus.fingerprint, args.remove, warn=_warn_line).label()}
    figures = published(corpus.fingerprint, warn=_warn_line)
    return {"corpus": str(args.corpus), "kind": corpus.kind, "fingerprint": corpus.fingerprint, **(action or {}),
            "published": {key: {"value": f.value, "shown": f.text(), "note": f.note} for key, f in figures.items()}}


def _print_published(r: dict) -> None:
    metric = {m.key: m for m in HEADLINE}
    for verb in ("set", "removed"):
        if verb in r:
            print(f"{'stored' if verb == 'set' else 'removed'}: {r[verb]}")
    where = f"{r['corpus']} ({r['kind']}, fingerprint {r['fingerprint']})"
    if not r["published"]:
        print(f"no published figures for {where}; add one with --set METRIC=VALUE --note SOURCE")
        return
    print(f"published figures for {where}:")
    for key, f in r["published"].items():
        print(f"  {metric[key].short.format(k='k'):<18} {f['shown']}" + (f"  ({f['note']})" if f["note"] else ""))


def _warn_interval(result: dict) -> None:
    """STS Spearman over fewer than FEW_SCORED_PAIRS pairs (fewer than MIN_SCORED_PAIRS are refused when the corpus
    is read) on stderr with its own 95% interval, which the figure alone does not show."""
    from core.data.pairs import FEW_SCORED_PAIRS

    n, value = result.get("n_pairs"), result.get("sts_spearman")
    if result.get("kind") != "pairs" or value is None or n is None or n >= FEW_SCORED_PAIRS:
        return
    print(f"warning: STS Spearman {value:.2f} is computed on only {n} {result['target_split']} pairs: its 95% "
          f"interval, {_interval_text(result.get('sts_spearman_ci'))}, is wide; {FEW_SCORED_PAIRS} or more pairs "
          "narrow it.", file=sys.stderr)


def _interval_text(ci) -> str:
    low, high = ci if ci else (None, None)
    return "undefined" if low is None or high is None else f"{low:.1f} to {high:.1f}"


def cmd_layers(args) -> dict:
    """kNN accuracy per layer; with --compare, also the run's model's and the linear CKA between the two."""
    from core.evaluation.evaluate import EvalSettings, compare_layers, evaluate_layers
    from core.runs.labels import run_reference

    corpus = _load_labelled(args, "Layer-wise kNN accuracy classifies texts by their label")
    settings = EvalSettings(layer_metric=args.knn_metric)
    run = _finished_run(args.compare) if args.compare is not None else None
    name = args.model or (run_reference(run) if run is not None else DEFAULT_MODEL)
    model = load_model(name, args.device)
    bars = TqdmPhases()
    try:
        if run is None:
            return {"model": name, "layers": evaluate_layers(model, corpus, settings, progress=bars)}
        tuned = load_model(run.artefacts["model"], args.device)
        return {"model": name, "run_id": run.id, "layers": compare_layers(model, tuned, corpus, settings, bars)}
    finally:
        bars.close()


def cmd_maps(args) -> dict:
    """The Maps page's maps (same code path and cache): the reference map, and with --run the run's fine-tuned map
    started from it, written to --out as HTML, PNG and Parquet."""
    from core.analysis.maps import MAX_POINTS, map_data, output_dir, write_maps
    from core.analysis.projection import neighbours_kept
    from core.runs.labels import run_reference

    max_points = MAX_POINTS.parse(MAX_POINTS.default if args.max_points is None else args.max_points)
    out = output_dir(args.out)
    run = _finished_run(args.run) if args.run is not None else None
    corpus = _load_labelled(args, "Maps colour texts by their label")
    reference = load_model(args.model or (run_reference(run) if run is not None else DEFAULT_MODEL), args.device)
    tuned = load_model(run.artefacts["model"], args.device) if run is not None else None
    bars = TqdmPhases()
    try:
        data = map_data(reference, tuned, corpus, args.method, max_points, progress=bars)
    finally:
        bars.close()
    files = write_maps(data, out)
    aligned = data.tuned_map is not None
    return {"n_points": len(data), "seconds_reference": round(data.ref_seconds, 2),
            "seconds_aligned": round(data.tuned_seconds, 2) if aligned else None,
            "neighbours_kept": round(neighbours_kept(data.ref_map, data.tuned_map), 4) if aligned else None,
            "method": args.method, "run_id": run.id if run is not None else None, "files": [str(f) for f in files]}


def _finished_run(run_id: str):
    """A run whose model can be loaded, or a UserError saying why not."""
    run = RunStore().get(run_id)  # a UserError when there is none
    if run.status != "done" or "model" not in run.artefacts:
        raise UserError(f"Run {run_id} is {run.status} and has no model to compare; pick a finished training run.")
    return run


def _compared(store: RunStore, run_id: str):
    """A run with figures to compare: a finished training run (its evaluation after training)."""
    run = store.get(run_id)  # a UserError when there is none
    if run.status != "done" or not run.metrics_after:
        raise UserError(f"Run {run_id} is {run.status} and has no evaluation after training to compare; pick a "
                        "finished training run (python -m core runs lists them).")
    return run


def cmd_compare(args) -> dict:
    """Paired differences, run B - run A, of every figure both runs report on the same test items, with their 95%
    intervals and p-values (core.evaluation.paired); one run: its figures after training - before."""
    from core.evaluation.paired import compare

    store = RunStore()
    a = _compared(store, args.run_a)
    if args.run_b is None:
        before, after, names = a.before or {}, a.metrics_after, (f"{a.id} before", f"{a.id} after")
    else:
        b = _compared(store, args.run_b)
        before, after, names = a.metrics_after, b.metrics_after, (a.id, b.id)
    diffs, notes = compare(before, after)
    if not diffs and not notes:
        raise UserError(f"{names[0]} and {names[1]} report no figure in common (one is a labelled-text run, the "
                        "other a pair or list run?); compare runs on the same corpus.")
    return {"a": names[0], "b": names[1], "metrics": [d.as_dict() for d in diffs], "notes": notes}


def _print_compare(r: dict) -> None:
    from core.evaluation.headline import HEADLINE, p_text

    metric = {m.key: m for m in HEADLINE}
    print(f"b = {r['b']}, a = {r['a']}; b - a with its paired 95% interval (bootstrap over the test items)")
    for d in r["metrics"]:
        m = metric[d["name"]]
        extra = "" if d["mcnemar_p"] is None else f" (McNemar {p_text(d['mcnemar_p'])})"
        print(f"  {m.short.format(k=16):<18} {m.text(d['a'])} -> {m.text(d['b'])}  "
              f"{m.difference_text(d['delta'], d['ci_low'], d['ci_high'], d['p_value'])}{extra}  n = {d['n']}")
    for note in r["notes"]:
        print(f"  not compared: {note}")


def _print_evaluate(r: dict) -> None:
    if r["kind"] == "lists":
        print(f"list corpus; model {r['model']}  (targets: {r['target_split']}, n={r['n_lists']} "
              f"{r['list_shape']} lists)")
        print(f"ordering accuracy {100 * r['ordering_accuracy']:.1f}%{_published_text(r, 'ordering_accuracy')}   "
              f"Kendall tau {r['kendall_tau']:.3f}{_published_text(r, 'kendall_tau')}")
        return
    if r["kind"] == "pairs":
        print(f"pair corpus; model {r['model']}  (targets: {r['target_split']}, n={r['n_pairs']} pairs)")
        value = r["sts_spearman"]
        print("no score column, so no STS Spearman" if value is None else
              f"STS Spearman x100 {value:.2f} (95% CI {_interval_text(r.get('sts_spearman_ci'))})"
              f"{_published_text(r, 'sts_spearman')}")
        return
    print(f"model {r['model']}  (S judged by {r['reference']}; targets: {r['targets']}, n={r['n_queries']}, "
          f"pool={r['n_pool']})")
    print(f"P@{r['k']} {r['polarity']:.1f} (sd {r['polarity_sd']:.1f}){_published_text(r, 'polarity')}   "
          f"S@{r['k']} {r['similarity']:.1f} (sd {r['similarity_sd']:.1f}){_published_text(r, 'similarity')}   "
          f"rank discount {r['discount']}")
    print(f"kNN accuracy {r['knn_accuracy']:.3f} (n_train={r['n_knn_train']})"
          f"{_published_text(r, 'knn_accuracy', True)}   "
          f"linear probe {r.get('linear_accuracy', float('nan')):.3f}{_published_text(r, 'linear_accuracy', True)}")


def _print_layers(r: dict) -> None:
    print(f"model {r['model']}" + (f" vs run {r['run_id']}" if "run_id" in r else ""))
    for row in r["layers"]:
        line = f"layer {row['layer']:>2}  kNN accuracy {row['knn_accuracy']:.3f}"
        if "cka" in row:
            line += f"  fine-tuned {row['knn_accuracy_tuned']:.3f}  CKA {row['cka']:.3f}"
        print(line)


def _print_maps(r: dict) -> None:
    print(f"{r['n_points']:,} texts; reference map {r['seconds_reference']:.1f} s"
          + (f", fine-tuned map {r['seconds_aligned']:.1f} s (keeps {r['neighbours_kept']:.1%} of each point's 10 "
             f"nearest map neighbours)" if r["seconds_aligned"] is not None else ""))
    for path in r["files"]:
        print(path)


# --- training, sweeps, runs, export ----------------------------------------------------------

def _add_flag(p: argparse.ArgumentParser, param: Param, help: str) -> None:
    """One flag per setting; values stay strings so TrainConfig parses them (a bad one exits 2 with one line). A
    setting's help is plain text, so its '%' is escaped for argparse, which reads it as a format."""
    help = help.replace("%", "%%")
    if param.type is bool:
        p.add_argument(param.flag, action="store_true", default=None, help=help)
    else:
        choices = f" ({'/'.join(param.choices)})" if param.choices else ""
        p.add_argument(param.flag, default=None, metavar=param.type.__name__.upper(), help=help + choices)


WORLD = ("nproc", "nnodes")  # the general settings of a run over several processes (core.jobs.ddp)


def _train_args(p: argparse.ArgumentParser, with_recipe: bool = True, distributed: bool = True) -> None:
    """Flags from the general settings and every recipe's own (a flag the chosen recipe lacks is refused); with
    `distributed`, the process count and the rendezvous of a run over several machines too."""
    p.add_argument("corpus", nargs="?", help="corpus file (optional with --config; not needed with --node-rank > 0)")
    p.add_argument("--config", help="a saved run config (YAML or JSON); flags given here override it")
    for param in GENERAL:
        if param.name != "corpus" and (with_recipe or param.name != "recipe") and (distributed
                                                                                   or param.name not in WORLD):
            _add_flag(p, param, param.help)
    if distributed:
        for param in (ddp.NODE_RANK, ddp.MASTER_ADDR, ddp.MASTER_PORT):
            help = param.help + (" Over several machines: start node 0 (which creates the run and shows its "
                                 "progress) and, on each other machine, the same command with its --node-rank; those "
                                 "take their settings from node 0." if param is ddp.NODE_RANK else "")
            _add_flag(p, param, help)
    for owners in recipe_params().values():
        param = owners[0][1]
        if len({q.help for _r, q in owners}) > 1:  # e.g. the knob: a margin or a scale, its default per recipe
            labels = "/".join(sorted({q.phrase for _r, q in owners}))
            text = f"the recipe's {labels}; defaults: " + ", ".join(f"{r.name} {q.default}" for r, q in owners)
        else:
            text = f"{param.help} [{', '.join(r.name for r, _q in owners)}]"
        _add_flag(p, param, text)
    p.add_argument("--out", help="export the finished model (and its card, config, embeddings) into this folder")
    p.add_argument("--json", action="store_true")


def train_config(args, overrides: dict | None = None) -> dict:
    """Config file first, then CLI flags, then command-specific overrides; validated by TrainConfig."""
    names = [p.name for p in GENERAL] + list(recipe_params())
    settings = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    settings.update(overrides or {})
    data = _config_file(args, settings, warn=True) if args.config else {}
    if data and settings.get("recipe", data["recipe"]) != data["recipe"]:
        data = for_recipe(data, settings["recipe"])  # the file's other recipe's settings do not carry over
    data.update(settings)
    if not data.get("corpus"):
        raise UserError("Name a corpus file (or a --config that has one).")
    cfg = TrainConfig.from_dict(data)
    corpus = _check_inputs(cfg)
    if corpus.kind == "labelled":  # the columns as detected, as the pages store them: runs compare column by column
        cfg = TrainConfig.from_dict({**cfg.to_dict(), "text_col": corpus.columns.text,
                                     "label_col": corpus.columns.label, "split_col": corpus.columns.split})
    return cfg.to_dict()


def _config_file(args, given: dict, warn: bool = False) -> dict:
    """The --config file's settings. A file it names by name and checksum (an export's config.yaml) is found on this
    machine or taken from the command line (`given`: the corpus argument, --sts-corpus, --documents); with `warn`, a
    given file whose checksum differs is said on stderr."""
    from core.training.config import file_settings

    files = {name: given[name] for name in file_settings() if given.get(name)}
    say = (lambda text: print(f"warning: {text}", file=sys.stderr)) if warn else None
    return TrainConfig.from_file(args.config, files, say).to_dict()


def _check_inputs(cfg):
    """Check the corpus and model names before a worker is spawned, so bad input exits 2 at once; returns the
    corpus."""
    from core.data.kinds import load_any
    from core.data.pairs import load_pairs

    corpus = load_any(cfg.corpus, text_col=cfg.text_col, label_col=cfg.label_col, split_col=cfg.split_col,
                      drop_leaked=cfg.drop_leaked, list_shape=cfg.list_shape)
    _warn(corpus)
    get_recipe(cfg.recipe).check_corpus(cfg, corpus)
    sts = load_pairs(cfg.sts_corpus) if cfg.sts_corpus else None
    if sts is not None and sts.columns.score is None:
        raise UserError(f"sts_corpus {cfg.sts_corpus} has no score column to correlate with.")
    for warning in sts.report.warnings if sts is not None else ():
        print(f"warning: sts_corpus {cfg.sts_corpus}: {warning}", file=sys.stderr)
    teacher = getattr(cfg, "teacher", None)
    for name in (cfg.model, cfg.reference, *teacher_names(teacher or "")):
        if name and name not in ("reference", "score"):
            resolve_model(name)
    note = teacher and self_distillation_note(teacher, cfg.model, cfg.reference)
    if note:
        print(f"note: {note}", file=sys.stderr)
    return corpus


def progress_run(store, run) -> tuple[object, str]:
    """(the run whose progress the bar shows, a prefix for its phase): a sweep's or reproduction's current child
    while one trains, so its steps and time left show, not just "configuration 2/4"; else the run itself."""
    child_id = run.progress.get("current_run")
    if run.kind not in PARENT_KINDS or not run.active or not child_id:
        return run, ""
    try:
        child = store.get(child_id)
    except UserError:  # deleted meanwhile: the parent's own phase still says where it is
        return run, ""
    return (child, f"{run.progress.get('phase')} · ") if child.active else (run, "")


def follow(store, run_id: str, start: bool = True) -> object:
    """Start the run's worker process (unless `start` is False: it was started already) and show its progress
    until it ends (a dead worker ends it as failed, see launch.poll); Ctrl-C cancels it."""
    if start:
        launch.start(store, run_id)
    bar, phase = None, None
    try:
        while True:
            run = launch.poll(store, run_id)
            shown, prefix = progress_run(store, run)
            prog = shown.progress
            if prefix + (prog.get("phase") or "") != phase:
                if bar is not None:
                    bar.close()
                phase = prefix + (prog.get("phase") or "")
                bar = tqdm(total=prog.get("total") or 0, desc=phase, file=sys.stderr, leave=False)
            if bar is not None and prog.get("total"):
                bar.total = prog["total"]
                bar.n = prog.get("step", 0)
                loss = shown.losses[-1]["loss"] if shown.losses else None
                bar.set_postfix_str(", ".join(
                    ([f"loss {loss:.4f}"] if loss is not None else [])
                    + ([f"about {fmt_seconds(max(prog['eta_s'], 1))} left"] if prog.get("eta_s") is not None
                       else [])), refresh=True)
            if run.status in ("done", "failed", "cancelled"):
                return run
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("cancelling...", file=sys.stderr)
        cancel(store, run_id)
        while (run := launch.poll(store, run_id)).active:
            time.sleep(0.5)
        return run
    finally:
        if bar is not None:
            bar.close()


def _finish_run(store, run, args) -> dict:
    if run.status == "failed":
        code = EXIT_USER_ERROR if run.progress.get("user_error") else 1
        raise RunFailed(code, f"run {run.id} failed: {run.error} (log: {store.run_dir(run.id) / 'worker.log'})")
    result = {"run_id": run.id, "status": run.status, "model_path": run.artefacts.get("model"),
              "before": run.before, "after": run.metrics_after,
              "timings": (run.progress.get("summary") or {}).get("timings")}
    if run.status == "done" and args.out:
        from core.runs.export import export_run

        result["export"] = export_run(store, run.id, args.out)
    return result


class RunFailed(Exception):
    """A run ended failed: exit 2 when its cause was the user's input, 1 for a crash."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def cmd_train(args, overrides: dict | None = None) -> dict:
    """A run in a background worker, or over several processes its DDP launcher (core.jobs.ddp); on a machine other
    than node 0 (--node-rank > 0) no run: this machine's processes, which take their settings from node 0."""
    nproc, nnodes = _world(args)  # the launch flags first: a bad one answers before the corpus is read
    meet = ddp.rendezvous(nnodes, args.node_rank, args.master_addr, args.master_port)
    if meet is not None and meet.node_rank > 0:
        return _follow_node(nproc, nnodes, meet)
    store = RunStore()
    run_id = store.create("train", train_config(args, overrides))
    if meet is not None:  # node 0 of a run over several machines: its launcher meets the others there
        launch.start(store, run_id, meet)
    return _finish_run(store, follow(store, run_id, start=meet is None), args)


def _world(args) -> tuple[int, int]:
    """nproc and nnodes as the run will have them: the flags, else the --config file's, else 1."""
    data = _config_file(args, vars(args)) if args.config else {}
    return tuple(GENERAL_PARAMS[name].parse(getattr(args, name) if getattr(args, name) is not None
                                            else data.get(name, 1)) for name in WORLD)


def _follow_node(nproc: int, nnodes: int, meet: ddp.Rendezvous) -> dict:
    """This machine's share of a run over several: its processes in the foreground until the run ends."""
    status, cause = ddp.launch(nproc, nnodes, meet)
    if status == "stopped":
        raise RunFailed(EXIT_INTERRUPTED, f"node {meet.node_rank} {cause}; the run fails on the other nodes")
    if status == "failed":
        raise RunFailed(1, f"node {meet.node_rank}: {cause}")
    return {"node_rank": meet.node_rank, "status": status}


def cmd_quick(args) -> dict:
    """The Trade-off page's quick margin point: a triplet run with the quick budget (top layers only unless
    --full), reused when one exists; `seconds` is the wall time from this call to the evaluated point."""
    from core.data.kinds import KIND_NAMES, corpus_kind
    from core.jobs import standby
    from core.jobs.quick import QUICK_RECIPE, find_quick, quick_config, quick_run

    t0 = time.monotonic()
    kind = _kind(args)
    if kind != "labelled":
        raise UserError(f"The quick margin point (the Trade-off page's margin slider) trains on a labelled corpus "
                        f"(text, label); {_kind_words(args, kind)}: train one of its recipes with "
                        "`python -m core train`.")
    if args.kind and (detected := corpus_kind(args.corpus)) != kind:  # a run's config has no kind to force
        raise UserError(f"The quick run's worker reads {args.corpus} by its column names, as {KIND_NAMES[detected]}, "
                        f"so --kind {kind} cannot apply to it; give the file a text and a label column instead.")
    margin = get_recipe(QUICK_RECIPE).knob_param.parse(args.margin)
    base = {"corpus": args.corpus, "model": args.model or DEFAULT_MODEL, "recipe": QUICK_RECIPE,
            "text_col": args.text_col, "label_col": args.label_col, "split_col": args.split_col, "device": args.device,
            "drop_leaked": args.drop_leaked}
    config = quick_config({k: v for k, v in base.items() if v is not None}, margin, full=args.full)
    _check_inputs(TrainConfig.from_dict(config))
    store = RunStore()
    existing = find_quick(store, config)
    start = "existing run" if existing else "warm standby" if standby.waiting(store) else "new worker"
    run_id = existing or quick_run(store, config, margin, full=args.full)
    run = follow(store, run_id, start=False)
    result = _finish_run(store, run, args)
    layers = f"top-{config['top_layers']} quick" if config["top_layers"] else "quick, all layers"
    return {"run_id": run.id, "status": run.status, "seconds": round(time.monotonic() - t0, 2),
            "mode": f"{layers}, {start}", "before": result["before"], "after": result["after"],
            "timings": result["timings"]}


def cmd_crop(args) -> dict:
    """A self-supervised run; its budget defaults (batch, lr) are the recipe's, --batches bounds the run."""
    overrides = {"recipe": args.augmentation}
    if args.batches:
        overrides["max_steps"] = args.batches
    return cmd_train(args, overrides)


def cmd_sweep(args) -> dict:
    from core.jobs.ray_sweep import reachable

    seeds = SEEDS.parse(args.seeds)  # before the corpus is read: a bad count answers at once
    # so do a bad engine or address and a cluster nothing listens at (exit 2), which the worker would find only later
    _engine, address = check_engine(args.engine, args.address)
    if address not in (None, "auto"):
        reachable(address)
    base = train_config(args)
    recipes = [r.strip() for r in (args.recipes or base["recipe"]).split(",") if r.strip()]
    knob = get_recipe(recipes[0]).knob_param if recipes else None
    if knob is None:
        raise UserError(f"Recipe {', '.join(recipes) or '(none)'} has no margin or scale to sweep.")
    margins = knob.parse_list(args.margins)
    store = RunStore()
    sweep_id = store.create("sweep", sweep_config(base, recipes, margins, seeds, engine=args.engine,
                                                  address=args.address))
    run = follow(store, sweep_id)
    if run.status == "failed":  # exit 2 when the cause was the user's input (an address Ray cannot connect to)
        code = EXIT_USER_ERROR if run.progress.get("user_error") else 1
        raise RunFailed(code, f"sweep {sweep_id} failed: {run.error}")
    children = sorted(store.list(sweep_id=sweep_id, with_losses=False), key=lambda r: r.created)
    return {"sweep_id": sweep_id, "status": run.status, "runs": [
        {"run_id": c.id, "recipe": c.config["recipe"], "margin": knob_value(c.config), "seed": c.config.get("seed"),
         "status": c.status, "before": c.before, "after": c.metrics_after} for c in children]}


def cmd_reproduce(args) -> dict:
    """A seed's headline experiment (core.reproduce) as a run whose arms are child runs; its rows as the result."""
    from core.reproduce.job import reproduction_config

    store = RunStore()
    run_id = store.create("reproduce", reproduction_config(args.name, args.data, args.quick, args.model))
    run = follow(store, run_id)
    if run.status == "failed":
        code = EXIT_USER_ERROR if run.progress.get("user_error") else 1
        log = store.run_dir(run.id) / "worker.log"
        raise RunFailed(code, f"reproduction {run.id} failed: {run.error} (log: {log})")
    if run.status != "done":
        raise RunFailed(EXIT_INTERRUPTED, f"reproduction {run.id} was {run.status}")
    after = run.metrics_after or {}
    return {"run_id": run.id, **{key: after.get(key) for key in ("name", "quick", "model", "rows", "runs")}}


def _print_reproduce(r: dict) -> None:
    print(f"reproduction {r['name']}{' (--quick)' if r['quick'] else ''}: run {r['run_id']}")
    print(table_text(r["rows"]))


def cmd_runs(args) -> dict:

    store = RunStore()
    store.reap_orphans()
    return {"runs": [
        {"run_id": r.id, "kind": r.kind, "status": r.status, "recipe": r.config.get("recipe"),
         "margin": knob_value(r.config), "settings": shown_text(r), "sweep_id": r.sweep_id, "after": r.metrics_after,
         "error": r.error}
        for r in store.list(with_losses=False)]}


def cmd_export(args) -> dict:
    from core.runs.export import export_run

    return export_run(RunStore(), args.run_id, args.out, embeddings=not args.no_embeddings)


def _print_train(r: dict) -> None:
    if "node_rank" in r:  # a follower node: the run and its results are node 0's
        print(f"node {r['node_rank']}: {r['status']} (the run's results are on node 0)")
        return
    print(f"run {r['run_id']}: {r['status']}")
    if r.get("model_path"):
        print(f"model: {r['model_path']}")
    for name in ("before", "after"):
        m = r.get(name)
        if m:
            shown = [f"{metric.short.format(k=m.get('k', 'k'))} {metric.text(m[metric.key])}"
                     for metric in HEADLINE if m.get(metric.key) is not None]
            print(f"{name:>6}: " + "  ".join(shown))
    if r.get("timings"):
        print("timings: " + ", ".join(f"{name.removesuffix('_s').replace('_', ' ')} {seconds:.1f} s"
                                      for name, seconds in r["timings"].items()))
    if r.get("export"):
        print(f"exported to {r['export']['dir']}")


def _print_quick(r: dict) -> None:
    done = r.get("status", "done") == "done"
    _print_train({**r, "status": f"done in {r['seconds']:.1f} s ({r['mode']})" if done else r["status"]})


def _print_sweep(r: dict) -> None:
    print(f"sweep {r['sweep_id']}: {r['status']}")
    for c in r["runs"]:
        after = c.get("after") or {}
        scores = f"P {after['polarity']:.1f}  S {after['similarity']:.1f}" if after else ""
        print(f"  {c['run_id']}  {c['recipe']:<18} margin {c['margin']!s:<6} seed {c['seed']!s:<4} {c['status']:<9} "
              f"{scores}")


def _headline_text(metrics: dict) -> str:
    """The headline figures a result holds (P and S, STS Spearman, ordering), as the pages show them."""
    return "  ".join(f"{m.short.format(k=metrics.get('k', 16))} {m.text(metrics[m.key])}" for m in HEADLINE
                     if m.key in ("polarity", "similarity", "sts_spearman", "ordering_accuracy", "kendall_tau")
                     and isinstance(metrics.get(m.key), (int, float)))


def _print_runs(r: dict) -> None:
    for c in r["runs"]:
        scores = _headline_text(c.get("after") or {})
        print(f"{c['run_id']}  {c['kind']:<6} {c['status']:<9} {c.get('recipe') or '':<18} "
              f"{'' if c.get('margin') is None else c['margin']!s:<6} {scores}"
              + (f"  {c['settings']}" if c.get("settings") else ""))


def _print_export(r: dict) -> None:
    print(f"exported to {r['dir']}: " + ", ".join(r["files"]))


COMMANDS: dict[str, tuple[Callable, Callable]] = {
    "evaluate": (cmd_evaluate, _print_evaluate),
    "layers": (cmd_layers, _print_layers),
    "maps": (cmd_maps, _print_maps),
    "train": (cmd_train, _print_train),
    "quick": (cmd_quick, _print_quick),
    "crop": (cmd_crop, _print_train),
    "sweep": (cmd_sweep, _print_sweep),
    "reproduce": (cmd_reproduce, _print_reproduce),
    "runs": (cmd_runs, _print_runs),
    "compare": (cmd_compare, _print_compare),
    "export": (cmd_export, _print_export),
    "published": (cmd_published, _print_published),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core", description="ContrastLab headless commands")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="P@k, S@k, kNN and linear-probe accuracy of a model on a labelled corpus; STS "
                        "Spearman on a pair corpus; ordering accuracy and Kendall tau on a list corpus")
    _corpus_args(ev)
    _leak_arg(ev)
    ev.add_argument("--reference", default=None, help="frozen reference model for S@k (default: the model itself)")
    ev.add_argument("--k", default="16", metavar="INT", help=K_PARAM.help)
    ev.add_argument(DISCOUNT.flag, default=DISCOUNT.default, metavar="linear|none", help=DISCOUNT.help)
    ev.add_argument(LIST_SHAPE.flag, default=None, metavar="chain|star", help=LIST_SHAPE.help)
    ev.add_argument("--knn-metric", choices=["euclidean", "cosine"], default="euclidean",
                    help="kNN on the model's embedding as it produces it (euclidean) or cosine")
    ly = sub.add_parser("layers", help="kNN accuracy of every layer's mean-pooled hidden state; with --compare, a "
                        "run's as well and the linear CKA between the two per layer (1.0 = unchanged)")
    _corpus_args(ly)
    _leak_arg(ly)
    ly.add_argument("--knn-metric", choices=["cosine", "euclidean"], default="cosine")
    ly.add_argument("--compare", metavar="RUN_ID", help="a finished run whose model is compared with --model "
                    "(default: the run's reference model)")
    mp = sub.add_parser("maps", help="2-D maps of a labelled corpus (the Maps page's): the reference model's and, with "
                        "--run, the run's model's started from it; HTML, PNG and Parquet (text, label, x, y) in --out")
    _corpus_args(mp)
    _leak_arg(mp)
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
    _train_args(tr)
    qk = sub.add_parser("quick", help="the Trade-off page's quick margin point: 256 mined triplets, one epoch, only "
                        "the top 2 layers trained from cached frozen states; a run reused when it exists")
    _corpus_args(qk)
    _leak_arg(qk)
    qk.add_argument("--margin", required=True, help="triplet margin (cosine distance)")
    qk.add_argument("--full", action="store_true", help="train every layer (the page's \"Retrain fully\")")
    qk.add_argument("--out", help="export the finished model into this folder")
    cr = sub.add_parser("crop", help="self-supervised fine-tuning with crop (or dropout) augmentation")
    _train_args(cr, with_recipe=False)
    cr.add_argument("--augmentation", choices=[r.name for r in RECIPES.values() if r.self_supervised], default="crop")
    cr.add_argument("--batches", type=int, default=None, help="stop after this many batches")
    sw = sub.add_parser("sweep", help="train and evaluate a grid of (recipe, margin or scale) configurations")
    _train_args(sw, distributed=False)
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
    rp.add_argument("--json", action="store_true")
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
    pb = sub.add_parser("published", help="the published figures stored with a corpus (\"published: 77.6 on this "
                        "test set\"), shown beside ours by evaluate and the pages: list them, set one or remove one")
    pb.add_argument("corpus", help="the corpus file, read as evaluate reads it (its content fingerprint is the key)")
    for flag in ("--text-col", "--label-col", "--split-col"):
        pb.add_argument(flag)
    pb.add_argument("--kind", default=None, metavar="labelled|pairs|lists", help="read the file as this kind of "
                    "corpus (default: from the column names)")
    _leak_arg(pb)
    pb.add_argument(LIST_SHAPE.flag, default=None, metavar="chain|star", help=LIST_SHAPE.help)
    pb.add_argument("--set", metavar="METRIC=VALUE", help="store a figure in the unit the pages show it, e.g. "
                    "sts_spearman=77.6, knn_accuracy=85.0 for 85%%; METRIC one of "
                    f"{', '.join(m.key for m in HEADLINE)}")
    pb.add_argument("--note", metavar="TEXT", help="the figure's source, e.g. 'Reimers & Gurevych 2019, table 2' "
                    "(one line, at most 200 characters)")
    pb.add_argument("--remove", metavar="METRIC", help="remove the stored figure of this metric")
    pb.add_argument("--json", action="store_true")
    return parser


def _sigterm_interrupts() -> Callable[[], None]:
    """While a command runs, SIGTERM (`kill PID`, `timeout`) interrupts it as Ctrl-C does: a run it follows is
    cancelled and waited for, not left training without its CLI, and the exit status is EXIT_INTERRUPTED. Returns
    what puts the previous handler back (nothing to do off the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def main(argv: list[str] | None = None) -> int:
    setup_offline()
    args = build_parser().parse_args(argv)
    run, show = COMMANDS[args.command]
    restore_sigterm = _sigterm_interrupts()
    try:
        result = run(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except RunFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:  # Ctrl-C outside a run's follower (which cancels the run), or a second one in it
        print("error: interrupted; a run already asked to stop still stops on its own (see: python -m core runs)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        restore_sigterm()
    try:
        if args.json:
            print(json.dumps(result))
        else:
            show(result)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head` closed the pipe: the reader has what it wanted, so no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # and none when Python flushes at exit
    # a run (train, crop, quick, sweep) that ended cancelled (Ctrl-C, SIGTERM to the CLI or its worker, the page's
    # Cancel) printed its status and what it has; it exits as an interrupted command does, as reproduce does
    return EXIT_INTERRUPTED if isinstance(result, dict) and result.get("status") == "cancelled" else 0
