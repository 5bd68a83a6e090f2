"""Fine-tuning with sentence-transformers' own trainer: freezing, pooling, progress/cancel callbacks,
before/after evaluation and an atomically saved model. The config is core.training.config's; examples, loss,
batch sampler and extra callbacks come from the run's recipe."""

from __future__ import annotations

import copy
import ctypes
import gc
import json
import math
import re
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Protocol

import torch
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.base.sampler import BatchSamplers
from sentence_transformers.sentence_transformer.modules import Pooling
from transformers import PrinterCallback, TrainerCallback

from core.data.corpus import Corpus
from core.data.kinds import load_any
from core.data.lists import ListCorpus
from core.data.pairs import PairCorpus, load_pairs
from core.errors import Cancelled, UserError
from core.evaluation.evaluate import EvalSettings, eval_sets, evaluate
from core.evaluation.evaluator import TradeoffEvaluator
from core.evaluation.ordering import evaluate_lists, ordering_metrics
from core.evaluation.sts import evaluate_pairs, sts_spearman
from core.models.ata import ATAPooling, build_ata_model
from core.models.loading import load_model
from core.training.card import contrastlab_card_section
from core.training.config import TrainConfig
from core.training.recipes import get_recipe
from core.training.top_layers import split_layer, top_layers_view


class Reporter(Protocol):
    """Where a training run reports to (a run in the database, a test, a progress bar)."""

    def progress(self, **fields) -> None: ...
    def should_stop(self) -> bool: ...
    def log_loss(self, step: int, loss: float) -> None: ...
    def log_eval(self, point: dict) -> None: ...


# --- model preparation -----------------------------------------------------------------------

_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")


def freeze(model, embeddings: bool, first_layers: int) -> dict:
    """Freeze the embedding layer and/or the first n transformer layers; returns parameter counts."""
    hf = model[0].model
    n_layers = getattr(hf.config, "num_hidden_layers", None)
    if n_layers is not None and first_layers > n_layers:
        raise UserError(f"Cannot freeze {first_layers} layers: the model has {n_layers}.")
    frozen = total = 0
    for name, param in hf.named_parameters():
        match = _LAYER.search(name)
        in_frozen_layer = match is not None and int(match.group(1)) < first_layers
        is_embedding = match is None and "embeddings" in name
        if in_frozen_layer or (embeddings and is_embedding):
            param.requires_grad_(False)
            frozen += param.numel()
        total += param.numel()
    return {"frozen_params": frozen, "total_params": total}


def set_pooling(model, pooling: str):
    """Swap the pooling module; 'model' keeps the model's own."""
    if pooling == "model":
        return model
    if pooling == "ata":
        return build_ata_model(model)
    for i, module in enumerate(model):
        if isinstance(module, Pooling):
            model[i] = Pooling(model[0].get_embedding_dimension(), pooling_mode=pooling)
            return model
    raise UserError("This model has no pooling module to replace; keep pooling 'model'.")


def _precision_args(precision: str, device: str) -> dict:
    if not device.startswith("cuda"):
        return {}
    if precision == "auto":
        precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return {"fp16": precision == "fp16", "bf16": precision == "bf16"}


# --- training --------------------------------------------------------------------------------


def _callback(reporter: Reporter):
    class ReportCallback(TrainerCallback):
        """Progress, ETA, loss and cancel: checked after every optimiser step."""

        def __init__(self) -> None:
            self.t0 = time.monotonic()
            self.examples_per_step = 0

        def on_train_begin(self, args, state, control, **kwargs):
            self.t0 = time.monotonic()
            self.examples_per_step = args.per_device_train_batch_size * max(1, args.gradient_accumulation_steps)

        def on_step_end(self, args, state, control, **kwargs):
            elapsed = time.monotonic() - self.t0
            step, total = state.global_step, state.max_steps
            rate = step / elapsed if elapsed > 0 else 0.0
            reporter.progress(phase="training", step=step, total=total, elapsed_s=round(elapsed, 2),
                              eta_s=round((total - step) / rate, 1) if rate else None,
                              examples_per_s=round(rate * self.examples_per_step, 1))
            if reporter.should_stop():
                control.should_training_stop = True
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                reporter.log_loss(state.global_step, float(logs["loss"]))
            evals = {k.removeprefix("eval_"): v for k, v in (logs or {}).items()
                     if k.startswith("eval_") and not k.endswith(("runtime", "per_second"))}
            if any(k in evals for k in ("polarity", "knn_accuracy")):
                reporter.log_eval({"step": state.global_step, **evals})

    return ReportCallback()


def total_steps(cfg: TrainConfig, n_examples: int) -> int:
    """Optimiser steps of a run: max_steps, else epochs over the examples (the learning-rate schedule's length)."""
    return cfg.max_steps or max(1, math.ceil(math.ceil(n_examples / cfg.batch_size) * cfg.epochs))


def make_trainer(cfg: TrainConfig, model, loss, dataset, out_dir: Path, reporter: Reporter | None,
                 evaluator=None):
    """A plain SentenceTransformerTrainer; our additions are the progress callback, the recipe's batch sampler
    and callbacks, and an evaluator."""
    recipe = get_recipe(cfg.recipe)
    total = total_steps(cfg, len(dataset))
    eval_args = {}
    if evaluator is not None and cfg.eval_every > 0:
        eval_args = {"eval_strategy": "steps", "eval_steps": cfg.eval_every}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out_dir),
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps if cfg.max_steps > 0 else -1,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.lr,
        warmup_steps=int(cfg.warmup_ratio * total),
        seed=cfg.seed,
        data_seed=cfg.seed,
        batch_sampler=BatchSamplers(recipe.batch_sampler),
        logging_steps=max(1, min(10, total // 20)),
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=str(model.device).startswith("cuda"),  # pinning helps host-to-GPU copies only
        **_precision_args(cfg.precision, str(model.device)),
        **eval_args,
    )
    callbacks = [*([_callback(reporter)] if reporter is not None else []), *recipe.callbacks(cfg, loss)]
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss,
                                         evaluator=evaluator if eval_args else None, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # it prints log dicts to stdout, where the CLI prints results
    return trainer


def _evaluate(model, reference, corpus: Corpus | PairCorpus | ListCorpus, settings: EvalSettings, progress,
              model_name: str, sts: PairCorpus | None, lists: ListCorpus | None) -> dict:
    """P@k, S@k and kNN accuracy on a labelled corpus, STS Spearman on a pair corpus, ordering on a list corpus;
    plus the STS Spearman of the run's extra `sts` pair corpus and the ordering of a list recipe's target lists."""
    if isinstance(corpus, ListCorpus):
        result = evaluate_lists(model, corpus, model_name, progress=lambda d, t: progress("target lists", d, t))
    elif isinstance(corpus, PairCorpus):
        result = evaluate_pairs(model, corpus, model_name)
    else:
        result = evaluate(model, reference, corpus, settings, progress=progress, model_name=model_name)
    if lists is not None and lists is not corpus:
        result.update(ordering_metrics(model, lists, progress=lambda d, t: progress("target lists", d, t)))
    if sts is not None:
        result["sts_spearman"] = sts_spearman(model, sts)
    return result


def _release_memory() -> None:
    """Hand the memory training freed back to the system before evaluating: glibc keeps it otherwise (about 1.3 GB
    after a 2,000-triplet run), and the evaluation's arrays then stack on top (bench/scale.py: worker peak RSS)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        pass


def _top_layers(model, cfg: TrainConfig, corpus, settings: EvalSettings, dataset, reporter: Reporter):
    """With top_layers, the block trains and evaluates only the model's top layers from cached frozen states
    (core.training.top_layers), prefilled for the examples' texts and the texts the evaluation encodes."""
    if not cfg.top_layers:
        return nullcontext()
    texts = [value for column in dataset.column_names for value in dataset[column] if isinstance(value, str)]
    if isinstance(corpus, Corpus):
        texts += eval_sets(corpus, settings).train_texts + list(corpus.test_texts)
    reporter.progress(phase="caching the frozen layers' output", step=None, total=None, eta_s=None)
    return top_layers_view(model, cfg.top_layers, texts,
                           progress=lambda d, t: reporter.progress(phase="caching the frozen layers' output",
                                                                   step=d, total=t))


def run_training(cfg: TrainConfig, reporter: Reporter, work_dir: Path) -> dict:
    """Evaluate the base model, train, evaluate again, save the model to work_dir/'model'.

    The caller renames work_dir into place only when this returns, so a failed or cancelled run leaves
    nothing exportable. Raises Cancelled when the reporter asked to stop.
    """
    recipe = get_recipe(cfg.recipe)
    timings: dict[str, float] = {}
    t0 = time.monotonic()

    def phase(name: str):
        # progress fields merge, so clear the previous phase's counters
        reporter.progress(phase=name, step=None, total=None, eta_s=None)

    phase("loading corpus and models")
    corpus = load_any(cfg.corpus, text_col=cfg.text_col, label_col=cfg.label_col, split_col=cfg.split_col)
    sts = load_pairs(cfg.sts_corpus) if cfg.sts_corpus else None
    recipe.check_corpus(cfg, corpus)
    if cfg.eval_every > 0 and corpus.kind != "labelled":
        raise UserError("Evaluation during training (eval_every) is available for labelled corpora only; set it to 0.")
    model = load_model(cfg.model, cfg.device)
    if (cfg.reference or cfg.model) == cfg.model:  # a copy in memory: as good as a second load, and quicker
        reference = copy.deepcopy(model)  # its attributes too (contrastlab_source)
    else:
        reference = load_model(cfg.reference, cfg.device)
    reference.requires_grad_(False)
    settings = EvalSettings(k=cfg.eval_k)

    def enc_progress(label):
        return lambda name, done, total: reporter.progress(phase=f"{label}: {name}", step=done, total=total)

    lists = None
    if recipe.lists is not None:
        phase("building lists")
        lists = recipe.lists(cfg, corpus, reference, lambda d, t: reporter.progress(phase="lists: encoding", step=d,
                                                                                   total=t))
    base_is_reference = (cfg.reference or cfg.model) == cfg.model
    before = _evaluate(reference if base_is_reference else model, reference, corpus, settings,
                       progress=enc_progress("evaluating before"), model_name=cfg.model, sts=sts, lists=lists)
    reporter.progress(metrics_before=before)
    timings["evaluate_before_s"] = time.monotonic() - t0

    t1 = time.monotonic()
    phase("preparing examples")
    dataset, example_stats = recipe.build_examples(cfg, corpus if lists is None else lists, reference,
                                                   progress=lambda d, t: reporter.progress(phase="examples: encoding",
                                                                                           step=d, total=t))
    reporter.progress(example_stats=example_stats)
    timings["examples_s"] = time.monotonic() - t1
    if reporter.should_stop():
        raise Cancelled()

    model = set_pooling(model, cfg.pooling)
    if cfg.top_layers:
        freeze_stats = freeze(model, True, split_layer(model, cfg.top_layers))
    else:
        freeze_stats = freeze(model, cfg.freeze_embeddings, cfg.freeze_layers)
    t_states = time.monotonic()
    with _top_layers(model, cfg, corpus, settings, dataset, reporter):
        timings["frozen_states_s"] = time.monotonic() - t_states
        loss = recipe.build_loss(model, cfg)
        evaluator = TradeoffEvaluator(corpus, reference, settings) if cfg.eval_every > 0 else None
        trainer = make_trainer(cfg, model, loss, dataset, work_dir / "trainer", reporter, evaluator)
        reporter.progress(phases=recipe.phases(cfg, total_steps(cfg, len(dataset))))
        t2 = time.monotonic()
        train_out = trainer.train()
        timings["train_s"] = time.monotonic() - t2
        _release_memory()
        if reporter.should_stop():
            raise Cancelled()

        t3 = time.monotonic()
        after = _evaluate(model, reference, corpus, settings, progress=enc_progress("evaluating after"),
                          model_name=f"{cfg.model} + {cfg.recipe}", sts=sts, lists=lists)
        timings["evaluate_after_s"] = time.monotonic() - t3
    result = {
        "before": before,
        "after": after,
        "examples": example_stats,
        "freeze": freeze_stats,
        "train_loss": float(train_out.training_loss),
        "steps": int(train_out.global_step),
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "corpus": corpus.summary(),
        **({"lists": lists.summary()} if lists is not None and lists is not corpus else {}),
    }
    phase("saving model")
    save_model(model, work_dir / "model", cfg, result)
    return result


def save_model(model, path: Path, cfg: TrainConfig, result: dict) -> None:
    """Save as a sentence-transformers directory, with our section appended to its model card."""
    model.save(str(path))
    readme = path / "README.md"
    existing = readme.read_text(encoding="utf-8") if readme.exists() else ""
    ata = any(isinstance(module, ATAPooling) for module in model)  # chosen for this run, or the base model's own
    readme.write_text(existing.rstrip() + "\n\n" + contrastlab_card_section(cfg, result, ata), encoding="utf-8")
    (path / "contrastlab_config.json").write_text(json.dumps(cfg.to_dict(), indent=2))


def run_job(ctx) -> dict:
    """Worker entry point (core.jobs.worker.JOBS['train']): train into the run's temp dir, then publish."""
    cfg = TrainConfig.from_dict(ctx.config)
    work = ctx.tmp_dir()
    result = run_training(cfg, ctx, work)
    ctx.store.set_metrics_before(ctx.run_id, result["before"])
    ctx.progress(phase="done", summary={k: v for k, v in result.items() if k not in ("before", "after")})
    ctx.commit_artefact("model", work / "model")
    return result["after"]
