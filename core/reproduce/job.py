"""A reproduction as a run of the store (core.jobs.worker.JOBS['reproduce']): each arm is a child train run,
trained and evaluated one after another in this process exactly as any run is (so it is listed, cancelled and
exported like one), then the experiment's rows are computed from the children's evaluations."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path

from core.errors import Cancelled, UserError, shorten
from core.reproduce import get_experiment
from core.reproduce.experiment import Arm, Outcome, Setup
from core.reproduce.generated import check_generator, generate_for
from core.reproduce.validation import hold_out, score_candidates


def reproduction_config(name: str, data: str | Path, quick: bool, model: str | None = None, *,
                        lists_per_step: object = None, select_split: object = None, generator: object = None,
                        generator_model: object = None) -> dict:
    """The stored config of a reproduction, checked now (unknown name, missing folder or file, a model that cannot
    be found, an option the experiment does not take or a bad value of one, an arm whose settings do not validate,
    a generator for an experiment without generated data: UserError), so a bad request never becomes a run."""
    from core.models.loading import DEFAULT_MODEL, resolve_model

    experiment = get_experiment(name)
    generator, generator_model = check_generator(generator, generator_model, experiment)
    options = {"lists_per_step": _lists_per_step(lists_per_step), "select_split": _split_name(select_split)}
    given = [k for k, v in options.items() if v is not None]
    if refused := [k for k in given if k not in experiment.options]:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in refused)
        raise UserError(f"{flags} {'applies' if len(refused) == 1 else 'apply'} to "
                        f"{', '.join(e.name for e in _taking(refused[0])) or 'no experiment'}, not {experiment.name}.")
    folder = Path(data).expanduser().resolve()
    experiment.paths(folder, quick)
    config = {"name": experiment.name, "data": str(folder), "quick": bool(quick), "model": model or DEFAULT_MODEL,
              **{k: options[k] for k in given},
              **({"generator": generator, "generator_model": generator_model} if generator else {})}
    resolve_model(config["model"])
    _check_data(experiment, arms_of(config))
    return config


def _check_data(experiment, arms: list[Arm]) -> None:
    """Read each arm's corpus as its run will, and check it suits the arm's recipe, before anything is queued: a
    file with other columns, or too small for the recipe's bands, is one line naming the file, instead of a run
    that fails with advice about flags `reproduce` does not have."""
    from core.data.kinds import load_any
    from core.training.config import TrainConfig, corpus_options
    from core.training.recipes import get_recipe

    checked: set[str] = set()
    for arm in arms:
        key = json.dumps({"corpus": arm.config["corpus"], **corpus_options(arm.config), "recipe": arm.config["recipe"]},
                         sort_keys=True, default=str)
        if key in checked:
            continue
        checked.add(key)
        file = Path(arm.config["corpus"]).name
        source = next((s for s in experiment.sources if s.file == file), None)
        try:
            corpus = load_any(arm.config["corpus"], **corpus_options(arm.config))
            get_recipe(arm.config["recipe"]).check_corpus(TrainConfig.from_dict(arm.config), corpus)
        except UserError as exc:
            reason = re.sub(FLAG_ADVICE, "", str(exc)).rstrip(". ")
            raise UserError(f"reproduce {experiment.name} cannot use {arm.config['corpus']} for its arm "
                            f"'{arm.label}': {reason}"
                            + (f"; it reads {file} as {source.described}." if source else ".")) from exc
        if source is not None and source.targets and corpus.target_split != source.targets:
            raise UserError(f"reproduce {experiment.name} scores its arms on the {source.targets} rows of {file} "
                            f"({source.holds}), but this file's targets are {corpus.target_split} rows "
                            f"({corpus.report.split_source}), which its figures would be named after; give {file} "
                            f"a split column with {source.targets} rows.")


def _taking(option: str) -> list:
    from core.reproduce import EXPERIMENTS

    return [e for e in EXPERIMENTS.values() if option in e.options]


# "; pass --text-col NAME and --label-col NAME": a loader's advice about flags that reproduce does not take
FLAG_ADVICE = r"[;,]? ?(?:pass|or|give) --[a-z-]+(?: [A-Z]+)?(?:(?:,| and| or) --[a-z-]+(?: [A-Z]+)?)*"
MAX_LISTS_PER_STEP = 4096  # the batch size's bound (core.training.config)


def _lists_per_step(value: object) -> int | None:
    """--lists-per-step as a whole number 1..MAX_LISTS_PER_STEP; UserError in one line otherwise."""
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LISTS_PER_STEP:
        raise UserError(f"--lists-per-step takes a whole number of lists from 1 to {MAX_LISTS_PER_STEP}, got "
                        f"{shorten(str(value))}.")
    return int(text)


def _split_name(value: object) -> str | None:
    """--select-split as a split name: printable, non-empty, at most 40 characters."""
    if value is None:
        return None
    text = str(value).strip()
    if not text or len(text) > 40 or not text.isprintable():
        raise UserError(f"--select-split names a split of the STS file (e.g. validation), got {shorten(str(value))}.")
    return text


def setup_of(config: dict) -> Setup:
    """How the stored reproduction `config` runs."""
    return Setup(config["quick"], config["model"], config.get("lists_per_step"), config.get("select_split"),
                 config.get("generator"), config.get("generator_model"))


def arms_of(config: dict) -> list[Arm]:
    """The experiment's arms with every setting validated (TrainConfig), stored as a run stores its config."""
    from core.training.config import TrainConfig

    setup = setup_of(config)
    arms = get_experiment(config["name"]).arms(Path(config["data"]), setup)
    return [Arm(a.label, TrainConfig.from_dict(a.config).to_dict()) for a in arms]


def run_arms(store, parent_id: str | None, arms: list[Arm], progress=None,
             should_stop=lambda: False) -> dict[str, Outcome]:
    """Train and evaluate each arm as a child run of `parent_id` (None: a run of its own), in this process, one
    after another; their outcomes by label. A cancelled arm raises Cancelled, a failed one UserError naming it.
    `progress(**fields)` hears which arm runs (the parent's progress); benchmarks call this with arms of their
    own."""
    from core.jobs.worker import execute

    outcomes: dict[str, Outcome] = {}
    for i, arm in enumerate(arms):
        if should_stop():
            raise Cancelled()
        child = store.create("train", arm.config, sweep_id=parent_id, corpus_name=Path(arm.config["corpus"]).name)
        store.claim(child, os.getpid())
        if progress:
            progress(phase=f"arm {i + 1}/{len(arms)}: {arm.label}", step=i, total=len(arms), current_run=child)
        execute(store, child)
        run = store.get(child)
        if run.status == "cancelled":
            raise Cancelled()
        if run.status != "done":
            raise UserError(f"the arm '{arm.label}' (run {child}) failed: {run.error}")
        outcomes[arm.label] = Outcome(child, run.config, run.before or {}, run.metrics_after or {},
                                      run.progress.get("summary") or {})
    return outcomes


def run_job(ctx) -> dict:
    config = reproduction_config(ctx.config["name"], ctx.config["data"], ctx.config.get("quick", False),
                                 ctx.config.get("model"), lists_per_step=ctx.config.get("lists_per_step"),
                                 select_split=ctx.config.get("select_split"), generator=ctx.config.get("generator"),
                                 generator_model=ctx.config.get("generator_model"))
    experiment = get_experiment(config["name"])
    arms = arms_of(config)
    setup = setup_of(config)
    data = Path(config["data"])
    files = {source.file: data / source.file for source in experiment.sources}  # what the arms train on
    if experiment.validation:  # rows no arm trains on, to choose among arms without looking at test
        arms, files[experiment.validation.source], held = hold_out(arms, experiment.validation, data,
                                                                    ctx.run_dir / "validation")
    if setup.generator:  # the papers' generated data first, from the arms' own training rows; every arm trains on it
        setup, arms = generate_for(ctx, experiment, setup, arms, files[experiment.generation.source])
    outcomes = run_arms(ctx.store, ctx.run_id, arms, ctx.progress, ctx.should_stop)
    if experiment.validation:
        outcomes = score_candidates(outcomes, experiment.validation, held, ctx.store, config["model"], ctx.progress)
    ctx.progress(phase="done", step=len(arms), total=len(arms))
    return {"name": experiment.name, "quick": config["quick"], "model": config["model"],
            "rows": [asdict(r) for r in experiment.rows(outcomes, setup)],
            "runs": {label: o.run_id for label, o in outcomes.items()},
            **({"generated": setup.generated} if setup.generated else {})}


def latest(store, name: str) -> tuple[object | None, object | None, object | None]:
    """(the newest finished reproduction of `name`, the newest one still queued or running, the newest one that
    failed or was cancelled after the finished one), each None if none: what the Reproductions page shows."""
    runs = sorted((r for r in store.list(kind="reproduce", with_losses=False) if r.config.get("name") == name),
                  key=lambda r: r.created, reverse=True)
    done = next((r for r in runs if r.status == "done"), None)
    active = next((r for r in runs if r.active), None)
    ended = next((r for r in runs if r.status in ("failed", "cancelled")), None)
    return done, active, ended if ended is not None and (done is None or ended.created > done.created) else None
