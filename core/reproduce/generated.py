"""A reproduction's training data written by a language model (--generator), as seeds 003 and 004 trained: before
the arms run, the experiment's Generation (core.reproduce.experiment) is made from its source file's training texts
with core.generation, into the reproduction's folder, and every arm trains on the file through its recipe setting
(listmle's lists, mgh's negatives). The item cache makes a rerun or a resumed reproduction regenerate nothing."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import Cancelled, UserError, shorten
from core.reproduce.experiment import Arm, Experiment, Setup

QUICK_LIST_STEPS = 8  # --quick: chains of 8 steps instead of the paper's 32, so a GPU writes them in minutes
SOURCE_SEED = 0


def check_generator(value: object, model: object, experiment: Experiment) -> tuple[str | None, str | None]:
    """(--generator as an http(s) URL or an absolute folder, --generator-model) checked before a run is queued;
    UserError in one line for an experiment that generates nothing, a folder that is not there, or a model name
    without a URL."""
    if value is None:
        if model is not None:
            raise UserError("--generator-model names the model a server serves; it goes with --generator URL.")
        return None, None
    if experiment.generation is None:
        from core.reproduce import EXPERIMENTS

        takers = ", ".join(e.name for e in EXPERIMENTS.values() if e.generation is not None)
        raise UserError(f"--generator applies to {takers}, not {experiment.name}: its paper trains on no generated "
                        "data.")
    text = str(value).strip()
    if text.lower().startswith(("http://", "https://")):
        name = None if model is None else str(model).strip()
        if model is not None and not (name and name.isprintable() and len(name) <= 200):
            raise UserError(f"--generator-model names a served model, got {shorten(str(model))}.")
        return text.rstrip("/"), name
    if model is not None:
        raise UserError("--generator-model names the model a server serves; with a local folder, --generator is the "
                        "model.")
    folder = Path(text).expanduser().resolve()
    if not text or not folder.is_dir():
        raise UserError(f"--generator takes a local language model folder or an http(s) URL of an OpenAI-compatible "
                        f"server; {shorten(text) if text else 'an empty value'} is neither.")
    return str(folder), None


def engine_of(setup: Setup):
    """The engine --generator names: the server's model (the one it lists, unless --generator-model picks), or the
    local folder."""
    from core.generation.engines import EndpointEngine, LocalEngine, served_models

    if not setup.generator.lower().startswith(("http://", "https://")):
        return LocalEngine(setup.generator)
    model = setup.generator_model
    if model is None:
        served = served_models(setup.generator)
        if len(served) != 1:
            raise UserError(f"The server at {setup.generator} lists {len(served)} models"
                            + (f" ({', '.join(served[:8])})" if served else "")
                            + "; name one with --generator-model NAME.")
        model = served[0]
    return EndpointEngine(setup.generator, model)


def source_texts(path: Path, column: str, count: int) -> list[str]:
    """Up to `count` distinct non-empty texts of `column` in the file's train rows (all rows where it has no split
    column), drawn with a fixed seed: the inputs the language model writes from."""
    from core.data.table import clean_texts, read_file

    df = read_file(path)[0]
    if column not in df.columns:
        raise UserError(f"{path.name} has no column '{column}' to generate from; the columns are: "
                        f"{', '.join(map(str, df.columns))}.")
    if "split" in df.columns:
        df = df[clean_texts(df["split"], "split").str.lower() == "train"]
    texts = list(dict.fromkeys(t for t in clean_texts(df[column], column) if t))
    if not texts:
        raise UserError(f"{path.name} has no training text in column '{column}' to generate from.")
    if len(texts) > count:
        keep = np.sort(np.random.default_rng(SOURCE_SEED).choice(len(texts), count, replace=False))
        texts = [texts[i] for i in keep]
    return texts


def generate_for(ctx, experiment: Experiment, setup: Setup, arms: list[Arm], source_file: Path
                 ) -> tuple[Setup, list[Arm]]:
    """Write the experiment's generated data into the reproduction's folder and point every arm at it: (the setup
    with the file's generation summary, the arms). `source_file`: the experiment's source file as the arms train on
    it (its training view where rows are held out for validation, so no held-out text is written from). A cancel
    raises Cancelled (nothing trains on part of the data); the finished items stay in the cache."""
    from core.data.provenance import generation_summary
    from core.generation.lists import DEFAULT_LAMBDA, DEFAULT_STEPS, ListSettings
    from core.generation.negatives import NegativeSettings
    from core.generation.run import generate

    spec = experiment.generation
    count = max(int(arm.config["examples"]) for arm in arms)
    folder = ctx.run_dir / "generated"
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{Path(spec.source).stem}-{spec.column}-train.csv"
    role = "text" if spec.kind == "lists" else "query"
    pd.DataFrame({role: source_texts(source_file, spec.column, count)}).to_csv(source, index=False)
    ctx.progress(phase="loading the language model", step=None, total=None, unit=None, eta_s=None)
    engine = engine_of(setup)
    if spec.kind == "lists":  # directional control needs the log-probabilities only a local model gives
        settings = ListSettings(method="directional" if engine.guided else "stepwise", lam=DEFAULT_LAMBDA,
                                steps=QUICK_LIST_STEPS if setup.quick else DEFAULT_STEPS)
    else:
        settings = NegativeSettings()

    def progress(tally) -> None:
        _per_s, tokens_s, left = tally.rates(time.monotonic())
        ctx.progress(phase=f"generating {spec.kind}", step=tally.done, total=tally.total, unit="items",
                     eta_s=None if left is None else round(left, 1), tokens_per_s=round(tokens_s, 1))

    out = folder / f"{spec.kind}.csv"
    outcome = generate(spec.kind, engine, source, out, settings, progress=progress, should_stop=ctx.should_stop,
                       check_against={"corpus": str(source_file)})
    if outcome.cancelled:
        raise Cancelled()
    setup = replace(setup, generated=generation_summary(out))
    return setup, [Arm(arm.label, {**arm.config, spec.param: str(out)}) for arm in arms]
