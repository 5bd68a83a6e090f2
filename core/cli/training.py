"""The commands that start a run in a background worker and follow it: train, quick, crop, sweep, reproduce; and serve,
which keeps a worker warm for them."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

from tqdm import tqdm

from core.cli.common import (EXIT_INTERRUPTED, EXIT_USER_ERROR, RunFailed, add_flag, columns_given, kind_of,
                             kind_words, refuse_flags, warn_corpus)
from core.cli.runs import headline_text
from core.errors import UserError
from core.evaluation.headline import HEADLINE
from core.jobs import ddp, launch, standby
from core.jobs.sweep import SEEDS, cancel, check_engine, sweep_config
from core.models.loading import DEFAULT_MODEL, resolve_model
from core.reproduce.report import table_text
from core.runs.labels import knob_name, knob_value
from core.runs.store import PARENT_KINDS, RunStore
from core.training.config import (GENERAL, GENERAL_PARAMS, TrainConfig, absolute_path, absolute_paths,
                                  checkpoint_text, corpus_options, for_recipe)
from core.training.eta import fmt_seconds, phase_text, seconds_left
from core.training.raoe import self_distillation_note, teacher_names
from core.training.recipes import get_recipe, recipe_params

WORLD = ("nproc", "nnodes")  # the general settings of a run over several processes (core.jobs.ddp)
SERVE_POLL_S = 1.0  # how often `serve` checks that a warm worker waits (a directory listing and one query)


def train_args(p: argparse.ArgumentParser, with_recipe: bool = True, distributed: bool = True) -> None:
    """Flags from the general settings and every recipe's own (a flag the chosen recipe lacks is refused); with
    `distributed`, the process count and the rendezvous of a run over several machines too."""
    p.add_argument("corpus", nargs="?", help="corpus file (optional with --config; not needed with --node-rank > 0)")
    p.add_argument("--corpus", dest="corpus_file", metavar="FILE", help="the corpus file, as the first argument "
                   "gives it (with --config: the original file an exported config names)")
    p.add_argument("--config", help="a saved run config (YAML or JSON); flags given here override it")
    for param in GENERAL:
        if param.name != "corpus" and (with_recipe or param.name != "recipe") and (distributed
                                                                                   or param.name not in WORLD):
            add_flag(p, param, param.help)
    if distributed:
        for param in (ddp.NODE_RANK, ddp.MASTER_ADDR, ddp.MASTER_PORT):
            help = param.help + (" Over several machines: start node 0 (which creates the run and shows its "
                                 "progress) and, on each other machine, the same command with its --node-rank; those "
                                 "take their settings from node 0." if param is ddp.NODE_RANK else "")
            add_flag(p, param, help)
        p.add_argument("--oversubscribe", action="store_true", help="start more processes per machine (nproc) than "
                       "its CPU cores, or its GPUs on a GPU machine; refused without it, since they would only "
                       "take turns on the same cores")
    for owners in recipe_params().values():
        param = owners[0][1]
        if len({q.help for _r, q in owners}) > 1:  # e.g. the knob: a margin or a scale, its default per recipe
            labels = "/".join(sorted({q.phrase for _r, q in owners}))
            text = f"the recipe's {labels}; defaults: " + ", ".join(f"{r.name} {q.default}" for r, q in owners)
        else:
            text = f"{param.help} [{', '.join(r.name for r, _q in owners)}]"
        add_flag(p, param, text)
    p.add_argument("--out", help="export the finished model (and its card, config, embeddings) into this folder")
    p.add_argument("--foreground", action="store_true", help="train in this process instead of a background worker: "
                   "no worker to start (8-10 s of imports), for a debugger, a profiler or a batch job; the run ends "
                   "if this process does")
    p.add_argument("--json", action="store_true")


def train_config(args, overrides: dict | None = None) -> dict:
    """Config file first, then CLI flags, then command-specific overrides; validated by TrainConfig."""
    names = [p.name for p in GENERAL] + list(recipe_params())
    settings = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    if args.corpus_file is not None:
        if args.corpus is not None and args.corpus != args.corpus_file:
            raise UserError(f"Two corpus files are given, {args.corpus} and --corpus {args.corpus_file}; give one.")
        settings["corpus"] = args.corpus_file
    settings.update(overrides or {})
    data = _config_file(args, settings, warn=True) if args.config else {}
    if data and settings.get("recipe", data["recipe"]) != data["recipe"]:
        data = for_recipe(data, settings["recipe"])  # the file's other recipe's settings do not carry over
    data.update(settings)
    if not data.get("corpus"):
        raise UserError("Name a corpus file (or a --config that has one).")
    from core.data.kinds import KINDS, column_settings

    cfg = TrainConfig.from_dict(data)
    corpus = _check_inputs(cfg)
    refuse_flags({flag: settings.get(name) for flag, name in (("--list-shape", "list_shape"),
                                                               ("--eval-k", "eval_k"), ("--discount", "discount"),
                                                               ("--trade-off-only", "trade_off_only"))},
                 corpus.kind, f"{cfg.corpus} is {KINDS[corpus.kind].title}")
    # the columns as detected, as the pages store them: runs compare column by column; paths absolute, as checked
    # from this folder (messages name them as given): the worker runs in another
    return absolute_paths(TrainConfig.from_dict({**cfg.to_dict(), **column_settings(corpus)}).to_dict())


def _config_file(args, given: dict, warn: bool = False) -> dict:
    """The --config file's settings. A file it names by name and checksum (an export's config.yaml) is found on this
    machine or taken from the command line (`given`: the corpus argument, --sts-corpus, --documents, and the column
    flags the given corpus is compared by); with `warn`, a given file whose content differs is said on stderr."""
    from core.training.config import COLUMN_SETTINGS, file_settings

    files = {name: given[name] for name in (*file_settings(), *COLUMN_SETTINGS) if given.get(name)}
    say = (lambda text: print(f"warning: {text}", file=sys.stderr)) if warn else None
    return TrainConfig.from_file(args.config, files, say).to_dict()


def _check_inputs(cfg):
    """Check the corpus and model names before a worker is spawned, so bad input exits 2 at once; returns the
    corpus."""
    from core.data.kinds import load_any
    from core.data.pairs import load_pairs

    corpus = load_any(cfg.corpus, **corpus_options(cfg.to_dict()))
    warn_corpus(corpus)
    get_recipe(cfg.recipe).check_corpus(cfg, corpus)
    sts = load_pairs(cfg.sts_corpus, picks=cfg.select_split) if cfg.sts_corpus else None
    if sts is not None and sts.columns.score is None:
        raise UserError(f"sts_corpus {cfg.sts_corpus} has no score column to correlate with.")
    for warning in sts.report.warnings if sts is not None else ():
        print(f"warning: sts_corpus {cfg.sts_corpus}: {warning}", file=sys.stderr)
    if cfg.select_split:
        from core.training.selection import selection_pairs  # torch: only for a run that picks its checkpoint

        selection_pairs(cfg, sts)
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


def follow(store, run_id: str, start: bool = True, foreground: bool = False) -> object:
    """Start the run's worker process (unless `start` is False: it was started already; with `foreground`, a thread
    of this process instead) and show its progress until it ends (a dead worker ends it as failed, see
    launch.poll); Ctrl-C cancels it."""
    if foreground:
        # The run's own output (the trainer's log lines) goes to stderr beside the progress bar, as a worker's goes to
        # its log: stdout stays the command's result, one JSON object with --json.
        with contextlib.redirect_stdout(sys.stderr):
            thread = launch.start_here(store, run_id)
            try:
                return follow(store, run_id, start=False)
            finally:
                thread.join()
    if start:
        launch.start(store, run_id)
    bar, phase = None, None
    try:
        while True:
            run = launch.poll(store, run_id)
            shown, prefix = progress_run(store, run)
            prog = shown.progress
            label = prefix + phase_text(shown.status, prog)
            if label != phase:
                if bar is not None:
                    bar.close()
                phase = label
                bar = tqdm(total=prog.get("total") or 0, desc=phase, file=sys.stderr, leave=False)
            if bar is not None:
                if prog.get("total"):
                    bar.total = prog["total"]
                    bar.n = prog.get("step", 0)
                loss = shown.losses[-1]["loss"] if shown.losses else None
                left = seconds_left(prog, time.time())  # counts down between reports, e.g. while saving
                bar.set_postfix_str(", ".join(
                    ([f"loss {loss:.4f}"] if loss is not None else [])
                    + ([f"about {fmt_seconds(max(left, 1))} left"] if left is not None else [])), refresh=True)
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
    summary = run.progress.get("summary") or {}
    result = {"run_id": run.id, "status": run.status, "model_path": run.artefacts.get("model"),
              "before": run.before, "after": run.metrics_after, "timings": summary.get("timings")}
    if summary.get("selection"):  # which checkpoint was saved: step 0 is the base model itself
        result |= {"selection": summary["selection"], "checkpoint": checkpoint_text(
            summary["selection"], summary.get("steps", "?"), run.config.get("sts_corpus"))}
    if run.status == "done" and args.out:
        from core.runs.export import export_run

        result["export"] = export_run(store, run.id, args.out)
    return result


def cmd_train(args, overrides: dict | None = None) -> dict:
    """A run in a background worker, or over several processes its DDP launcher (core.jobs.ddp); on a machine other
    than node 0 (--node-rank > 0) no run: this machine's processes, which take their settings from node 0."""
    nproc, nnodes, device = _world(args)  # the launch flags first: a bad one answers before the corpus is read
    _check_processes(nproc, device, args.oversubscribe)
    if args.foreground and nproc * nnodes > 1:
        raise UserError("--foreground runs the run in this process; a run over several processes (--nproc, --nnodes) "
                        "is started by its launcher: drop one or the other.")
    meet = ddp.rendezvous(nnodes, args.node_rank, args.master_addr, args.master_port)
    if meet is not None and meet.node_rank > 0:
        return _follow_node(nproc, nnodes, meet)
    store = RunStore()
    if nproc * nnodes == 1 and not args.foreground:
        _warm_early(store)
    run_id = store.create("train", train_config(args, overrides))
    if meet is not None:  # node 0 of a run over several machines: its launcher meets the others there
        launch.start(store, run_id, meet)
    return _finish_run(store, follow(store, run_id, start=meet is None, foreground=args.foreground), args)


def _warm_early(store: RunStore) -> None:
    """A worker for this call's run, started before its checks so that its imports (6-7 s) overlap theirs (the
    corpus read, scikit-learn's and torch's imports: 6.5 s before a quick run was handed over) on another core. The
    run goes to it when it is handed over, ready or still importing; were the call refused, it waits
    standby.CLI_IDLE_S for the next one and leaves."""
    standby.ensure(store, detached_s=standby.CLI_IDLE_S)


def _world(args) -> tuple[int, int, object]:
    """nproc, nnodes and device as the run will have them: the flags, else the --config file's, else the defaults."""
    data = _config_file(args, {**vars(args), "corpus": args.corpus or args.corpus_file}) if args.config else {}
    nproc, nnodes = (GENERAL_PARAMS[name].parse(getattr(args, name) if getattr(args, name) is not None
                                                else data.get(name, 1)) for name in WORLD)
    return nproc, nnodes, args.device if args.device is not None else data.get("device")


def _check_processes(nproc: int, device: object, oversubscribe: bool) -> None:
    """More processes on a machine than its GPUs (on a GPU machine) or CPU cores only make them take turns: a
    config's `nproc: 64` on a 2-core laptop started 64 trainers. Refused unless --oversubscribe."""
    if nproc == 1 or oversubscribe:
        return
    from core.models.loading import visible_gpus
    from core.models.threads import usable_cores

    gpus = 0 if str(device or "").strip().lower() == "cpu" else visible_gpus()
    have, what = (gpus, "GPUs") if gpus else (usable_cores(), "CPU cores")
    if nproc > have:
        raise UserError(f"nproc is {nproc}, more than this machine's {have} {what}; lower nproc to at most {have}, "
                        "or pass --oversubscribe to start them anyway.")


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
    from core.data.kinds import KINDS, corpus_kind
    from core.jobs.quick import QUICK_RECIPE, find_quick, quick_config, quick_run

    t0 = time.monotonic()
    kind = kind_of(args)
    if kind not in get_recipe(QUICK_RECIPE).kinds:
        raise UserError(f"The quick margin point (the Trade-off page's margin slider) trains on a labelled corpus "
                        f"(text, label); {kind_words(args, kind)}: train one of its recipes with "
                        "`python -m core train`.")
    if args.kind and (detected := corpus_kind(args.corpus)) != kind:  # a run's config has no kind to force
        raise UserError(f"The quick run's worker reads {args.corpus} by its column names, as {KINDS[detected].title}, "
                        f"so --kind {kind} cannot apply to it; give the file a text and a label column instead.")
    margin = get_recipe(QUICK_RECIPE).knob_param.parse(args.margin)
    store = RunStore()
    warm = standby.waiting(store)  # imports done before this call: its point costs only the run itself
    _warm_early(store)
    base = {"corpus": args.corpus, "model": args.model or DEFAULT_MODEL, "recipe": QUICK_RECIPE, **columns_given(args),
            "device": args.device, "drop_leaked": args.drop_leaked}
    config = quick_config(absolute_paths({k: v for k, v in base.items() if v is not None}), margin, full=args.full)
    _check_inputs(TrainConfig.from_dict(config))
    existing = find_quick(store, config)
    start = "existing run" if existing else "warm standby" if warm else "new worker"
    run_id = existing or quick_run(store, config, margin, full=args.full)
    run = follow(store, run_id, start=False)
    result = _finish_run(store, run, args)
    standby.ensure(store, detached_s=standby.CLI_IDLE_S)  # warm for the next point, as the page keeps one
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
    run = follow(store, sweep_id, foreground=args.foreground)
    if run.status == "failed":  # exit 2 when the cause was the user's input (an address Ray cannot connect to)
        code = EXIT_USER_ERROR if run.progress.get("user_error") else 1
        raise RunFailed(code, f"sweep {sweep_id} failed: {run.error}")
    children = sorted(store.list(sweep_id=sweep_id, with_losses=False), key=lambda r: r.created)
    return {"sweep_id": sweep_id, "status": run.status, "runs": [
        {"run_id": c.id, "recipe": c.config["recipe"], "knob": knob_name(c.config["recipe"]),
         "margin": knob_value(c.config), "seed": c.config.get("seed"),
         "status": c.status, "before": c.before, "after": c.metrics_after} for c in children]}


def cmd_reproduce(args) -> dict:
    """A seed's headline experiment (core.reproduce) as a run whose arms are child runs; its rows as the result."""
    from core.reproduce.job import arms_of, reproduction_config

    store = RunStore()
    model = absolute_path(args.model) if args.model else None  # the worker runs in another folder
    run_id = store.create("reproduce", reproduction_config(args.name, args.data, args.quick, model,
                                                           lists_per_step=args.lists_per_step,
                                                           select_split=args.select_split,
                                                           generator=args.generator,
                                                           generator_model=args.generator_model))
    run = follow(store, run_id)
    if run.status == "failed":
        code = EXIT_USER_ERROR if run.progress.get("user_error") else 1
        log = store.run_dir(run.id) / "worker.log"
        raise RunFailed(code, f"reproduction {run.id} failed: {run.error} (log: {log})")
    if run.status != "done":  # cancelled: what its finished arms measured, then exit 130 (main)
        from core.runs.labels import run_labels

        children = list(reversed(store.list(kind="train", sweep_id=run.id, with_losses=False)))
        labels = run_labels(children)
        arms = [{"run_id": child.id, "label": labels[child.id], "status": child.status,
                 "after": child.metrics_after if child.status == "done" else None} for child in children]
        return {"run_id": run.id, "name": args.name, "quick": args.quick, "status": run.status, "arms": arms,
                "arms_total": len(arms_of(run.config))}
    after = run.metrics_after or {}
    return {"run_id": run.id, "status": run.status,
            **{key: after.get(key) for key in ("name", "quick", "model", "rows", "runs", "generated")}}


def cmd_serve(args) -> dict:
    """Keep a warm worker (core.jobs.standby) waiting for this home's runs until Ctrl-C, so a CLI call's run starts at
    once instead of after a new worker's 6-7 s of imports, as a run started from the app does. The worker that
    took a run waits for the next once that run is done; a new one starts when a worker left (its run failed, or
    it waited CONTRASTLAB_STANDBY_S, 15 min, unused) and no run is active (its imports would take CPU from that
    run). Each leaves when this command ends."""
    if standby.idle_s() <= 0:
        raise UserError(f"{standby.ENV} is 0, which turns warm workers off; unset it (or set the seconds a worker "
                        "may wait unused) to serve them.")
    store = RunStore()
    print(f"keeping a warm worker for the runs in {store.root}; Ctrl-C (or kill {os.getpid()}) to stop",
          file=sys.stderr)
    started: list[int] = []
    try:
        while True:
            pid = standby.ensure(store)
            if pid is not None and pid not in started:
                started.append(pid)
                print(f"worker pid {pid} waits for the next run (once its imports are done)", file=sys.stderr)
            time.sleep(SERVE_POLL_S)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the normal way to stop serving
        stopped = standby.stop_all(store)
    return {"home": str(store.root), "workers": started, "stopped": stopped}


def print_train(r: dict) -> None:
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
    if r.get("checkpoint"):
        print(f"checkpoint: {r['checkpoint']}")
    if r.get("timings"):
        print("timings: " + ", ".join(f"{name.removesuffix('_s').replace('_', ' ')} {seconds:.1f} s"
                                      for name, seconds in r["timings"].items()))
    if r.get("export"):
        print(f"exported to {r['export']['dir']}")


def print_quick(r: dict) -> None:
    done = r.get("status", "done") == "done"
    print_train({**r, "status": f"done in {r['seconds']:.1f} s ({r['mode']})" if done else r["status"]})


def print_sweep(r: dict) -> None:
    print(f"sweep {r['sweep_id']}: {r['status']}")
    for c in r["runs"]:
        after = c.get("after") or {}
        scores = f"P {after['polarity']:.1f}  S {after['similarity']:.1f}" if after else ""
        print(f"  {c['run_id']}  {c['recipe']:<18} {c['knob']} {c['margin']!s:<6} seed {c['seed']!s:<4} "
              f"{c['status']:<9} {scores}")


def print_reproduce(r: dict) -> None:
    print(f"reproduction {r['name']}{' (--quick)' if r['quick'] else ''}: run {r['run_id']}"
          + ("" if r["status"] == "done" else f" {r['status']}"))
    if r["status"] == "done":
        if r.get("generated"):
            from core.data.provenance import generation_text

            print(f"every arm trained on {generation_text(r['generated'])}")
        print(table_text(r["rows"]))
        return
    finished = [arm for arm in r["arms"] if arm["after"]]
    for arm in finished:
        print(f"  {arm['label']}: {headline_text(arm['after'])}")
    print(f"  {r['arms_total'] - len(finished)} of {r['arms_total']} arms {r['status']} or not started; the table "
          "needs every arm, so it is not computed")


def print_serve(r: dict) -> None:
    print(f"stopped serving {r['home']}: {len(r['workers'])} warm worker(s) kept in turn, {len(r['stopped'])} unused "
          "one(s) ended")
