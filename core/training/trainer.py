"""Fine-tuning with sentence-transformers' own trainer: freezing, pooling, progress / whole-run ETA / cancel callbacks,
before/after evaluation and an atomically saved model. The config is core.training.config's; examples, loss,
batch sampler and extra callbacks come from the run's recipe. Under DDP (core.training.distributed) the same code
runs in every process: rank 0 evaluates, mines and saves, every rank trains."""

from __future__ import annotations

import copy
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
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator
from sentence_transformers.sentence_transformer.modules import Pooling
from transformers import PrinterCallback, TrainerCallback

from core import collector
from core.data.kinds import kind_of, load_any
from core.data.lists import ListCorpus
from core.data.pairs import load_pairs
from core.errors import Cancelled, UserError
from core.evaluation.corpus_eval import evaluation_texts, evaluate_corpus
from core.evaluation.evaluate import EvalSettings
from core.evaluation.evaluator import TradeoffEvaluator
from core.models.ata import build_ata_model
from core.models.loading import load_model, remember_fingerprint
from core.models.rates import encode_rate
from core.models.threads import threads_for_free_cores
from core.training import distributed
from core.training.card import save_with_card
from core.training.config import TrainConfig, corpus_options
from core.training.eta import EncodeShare, RunEta, save_seconds, work_curve
from core.training.recipes import get_recipe
from core.training.packing import packed_training
from core.training.selection import CheckpointSelection, selection_pairs
from core.training.top_layers import record_frozen_states, split_layer, top_layers_view


class Reporter(Protocol):
    """Where a training run reports to (a run in the database, a test, a progress bar)."""

    def progress(self, **fields) -> None: ...
    def should_stop(self) -> bool: ...
    def log_loss(self, step: int, loss: float) -> None: ...
    def log_eval(self, point: dict) -> None: ...


class SilentReporter:
    """The reporter of a DDP rank other than 0: rank 0 reports the run, and cancel reaches the others through
    distributed.StopSync."""

    def progress(self, **fields) -> None:
        pass

    def should_stop(self) -> bool:
        return False

    def log_loss(self, step: int, loss: float) -> None:
        pass

    def log_eval(self, point: dict) -> None:
        pass


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


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


class _SkipFinalEvaluation(TrainerCallback):
    """transformers evaluates the last step whether or not eval_steps divides it; the evaluation after training scores
    that same model in full (STS and lists too) and is logged at that step, so the trainer's own would repeat it."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            control.should_evaluate = False
        return control


class _ReportCallback(TrainerCallback):
    """Progress, whole-run ETA, loss, evaluation points and cancel: checked after every optimiser step. The time
    in-training evaluations and checkpoint selection's scorings take is kept apart, so the step rate (and
    examples/s) is training's own; the scorings still to come are added to the ETA."""

    def __init__(self, reporter: Reporter, eta: RunEta, selection: CheckpointSelection | None = None) -> None:
        self.reporter, self.eta, self.selection = reporter, eta, selection
        self.t0 = time.monotonic()
        self.examples_per_step = 0
        self.eval_s = 0.0  # seconds spent in in-training evaluations
        self.eval_t0: float | None = None  # when the one under way began
        self.share = EncodeShare(0)
        self.step = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.t0 = time.monotonic()
        self.examples_per_step = (args.per_device_train_batch_size * max(1, args.gradient_accumulation_steps)
                                  * args.world_size)

    def _eta(self, eta_s: float | None) -> float | None:
        """The run's ETA (core.training.eta) with checkpoint selection's scorings still to come, rounded."""
        if eta_s is not None and self.selection is not None and not self.eta.cancelled:
            eta_s += self.selection.seconds_left()
        return _rounded(eta_s)

    def on_step_end(self, args, state, control, **kwargs):
        elapsed = time.monotonic() - self.t0
        self.step = step = state.global_step
        train_s = elapsed - self.eval_s - (self.selection.seconds if self.selection is not None else 0.0)
        if self.reporter.should_stop():
            control.should_training_stop = True
            control.should_evaluate = False  # a cancelled run keeps nothing, so stop at once
            self.eta.cancel()
        rate = step / train_s if train_s > 0 else 0.0
        self.reporter.progress(phase="training", step=step, total=state.max_steps, unit="steps",
                               elapsed_s=round(elapsed, 2), eta_s=self._eta(self.eta.training(step, train_s)),
                               examples_per_s=round(rate * self.examples_per_step, 1))
        if control.should_evaluate:
            self.eval_t0, self.share = time.monotonic(), self.eta.share()
            self.reporter.progress(phase=f"evaluating at step {step}", step=0, total=self.share.total or None,
                                   unit="texts", eta_s=self._eta(self.eta.evaluating(step, 0.0, 0.0)))
        return control

    def evaluation_progress(self, name: str, done: int, total: int) -> None:
        """The in-training evaluator's encode progress: the ETA counts down through the evaluation."""
        if self.eval_t0 is None:
            return
        elapsed = time.monotonic() - self.eval_t0
        fraction = self.share.update(name, done, total, elapsed)
        left = self.eta.evaluating(self.step, elapsed, fraction, self.share.since or (0.0, 0.0))
        self.reporter.progress(step=self.share.done, total=self.share.total, eta_s=self._eta(left))

    def on_evaluate(self, args, state, control, **kwargs):
        if self.eval_t0 is not None:
            seconds = time.monotonic() - self.eval_t0
            self.eval_s += seconds
            self.eta.add_evaluation(seconds)
            self.eval_t0 = None
            self.reporter.progress(phase="training", step=state.global_step, total=state.max_steps, unit="steps",
                                   eta_s=self._eta(self.eta.after_step(state.global_step)))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.reporter.log_loss(state.global_step, float(logs["loss"]))
        evals = {k.removeprefix("eval_"): v for k, v in (logs or {}).items()
                 if k.startswith("eval_") and not k.endswith(("runtime", "per_second"))}
        if any(k in evals for k in ("polarity", "knn_accuracy")):
            self.reporter.log_eval({"step": state.global_step, **evals})


def total_steps(cfg: TrainConfig, n_examples: int) -> int:
    """Optimiser steps of a run: max_steps, else epochs over the examples (the learning-rate schedule's length).
    Over several processes each step trains one batch per process, and the last, partial batch is dropped (as
    sentence-transformers does under DDP, so no rank waits for a batch another lacks)."""
    if cfg.world_size == 1:
        per_epoch = math.ceil(n_examples / cfg.batch_size)
    else:
        per_epoch = n_examples // cfg.effective_batch_size
    return cfg.max_steps or max(1, math.ceil(per_epoch * cfg.epochs))


def _ddp_args(cfg: TrainConfig, device: str) -> dict:
    """The trainer's DDP settings under a process group (core.training.distributed.init made it, so the trainer
    joins it rather than making its own). find_unused_parameters: a transformer's pooler, like any trainable
    parameter the loss does not reach, gets no gradient, and DDP would otherwise fail waiting for it."""
    if cfg.world_size == 1:
        return {}
    cuda = device.startswith("cuda")
    return {"ddp_backend": "nccl" if cuda else "gloo", "use_cpu": not cuda, "ddp_find_unused_parameters": True,
            "dataloader_drop_last": True}


class _ServedElsewhere(SentenceEvaluator):
    """The in-training evaluator of a DDP rank other than 0: sentence-transformers runs the evaluator on rank 0
    only (the others wait, serving its encode calls) and broadcasts its scores, but every rank's trainer needs one
    to evaluate at the same steps."""

    def __call__(self, model, output_path=None, epoch: int = -1, steps: int = -1) -> dict:
        raise RuntimeError("the in-training evaluation runs on rank 0")


def make_trainer(cfg: TrainConfig, model, loss, dataset, out_dir: Path, reporter: Reporter | None,
                 evaluator: SentenceEvaluator | None = None, eta: RunEta | None = None,
                 selection: CheckpointSelection | None = None):
    """A plain SentenceTransformerTrainer; our additions are the progress callback (its whole-run ETA from `eta`,
    else from the steps alone), the recipe's batch sampler and callbacks, an evaluator that skips the last step
    and reports its encoding to the progress callback, checkpoint selection (after the progress callback, so it sees
    a cancel and its scorings stay out of the step rate), and under DDP the stop sync that ends every rank at the
    same step."""
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
        **_ddp_args(cfg, str(model.device)),
        **eval_args,
    )
    callbacks: list[TrainerCallback] = [_SkipFinalEvaluation()] if eval_args else []
    if reporter is not None:
        report = _ReportCallback(reporter, eta or RunEta(total, cfg.eval_every if eval_args else 0), selection)
        callbacks.append(report)
        if eval_args and isinstance(evaluator, TradeoffEvaluator):
            evaluator.progress = report.evaluation_progress
    callbacks += recipe.callbacks(cfg, loss)
    if selection is not None:
        callbacks.append(selection)
    if cfg.world_size > 1:
        callbacks.append(distributed.StopSync())  # last: it sees every other callback's decision to stop
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss,
                                         evaluator=evaluator if eval_args else None, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # it prints log dicts to stdout, where the CLI prints results
    return trainer


def eval_settings(cfg: TrainConfig) -> EvalSettings:
    """How a run's evaluations score a labelled corpus: its k and discount, and without the kNN reference set when
    it scores the trade-off only (EvalSettings.knn_train_max)."""
    return EvalSettings(k=cfg.eval_k, discount=cfg.discount, **({"knn_train_max": 0} if cfg.trade_off_only else {}))


def _top_layers(model, cfg: TrainConfig, corpus, settings: EvalSettings, dataset, reporter: Reporter,
                known: dict):
    """With top_layers, the block trains and evaluates only the model's top layers from cached frozen states
    (core.training.top_layers), prefilled for the examples' texts and the texts the evaluation encodes (from `known`,
    what the before-evaluation's pass recorded, where it has them)."""
    if not cfg.top_layers:
        return nullcontext()
    texts = [value for column in dataset.column_names for value in dataset[column] if isinstance(value, str)]
    texts += [text for part in evaluation_texts(corpus, settings) for text in part]
    reporter.progress(phase="caching the frozen layers' output", step=None, total=None, eta_s=None)
    return top_layers_view(model, cfg.top_layers, texts,
                           progress=lambda d, t: reporter.progress(phase="caching the frozen layers' output",
                                                                   step=d, total=t), known=known)


def _scores(metrics: dict) -> dict:
    """An evaluation's figures as an evaluation-history point holds them: the numbers, as the in-training
    evaluator's are (no model name, counts or per-class tables)."""
    return {k: v for k, v in metrics.items() if isinstance(v, float)}


def _run_eta(cfg: TrainConfig, model, dataset, timing: dict, eval_texts: int) -> RunEta:
    """The run's ETA model (core.training.eta) from what this machine measured: one evaluation is the
    before-evaluation's scoring time (recorded with its result, so known even when it came from the cache; its
    start-up, the encode workers starting, is not repeated by a later evaluation) plus
    encoding its texts at the rate this machine last measured for this architecture (core.models.rates). With
    top_layers the evaluations run only the top layers, at a rate only training measures."""
    spent = float(timing.get("encode_s", 0.0)) + float(timing.get("startup_s", 0.0))  # start-up: a one-off
    score_s = max(float(timing.get("seconds", 0.0)) - spent, 0.0)
    rate = None if cfg.top_layers else encode_rate(model)
    text_columns = sum(getattr(f, "dtype", None) in ("string", "large_string") for f in dataset.features.values())
    return RunEta(
        total_steps=total_steps(cfg, len(dataset)), eval_every=cfg.eval_every,
        eval_s=score_s + eval_texts / rate if rate else None, score_s=score_s, eval_texts=eval_texts,
        texts_per_step=cfg.batch_size * text_columns,
        save_s=save_seconds(sum(p.numel() * p.element_size() for p in model.parameters())),
    )


def load_run_corpus(cfg: TrainConfig):
    """The run's corpus as its config names it, checked against its recipe: one home for how a run reads its data
    (the run itself, and a sweep on Ray mining for its points)."""
    corpus = load_any(cfg.corpus, **corpus_options(cfg.to_dict()))
    get_recipe(cfg.recipe).check_corpus(cfg, corpus)
    return corpus


def build_lists(cfg: TrainConfig, corpus, reference, progress) -> ListCorpus | None:
    """A list recipe's lists from the run's corpus (None for any other recipe): what its examples and its ordering
    metrics come from."""
    recipe = get_recipe(cfg.recipe)
    return recipe.lists(cfg, corpus, reference, progress) if recipe.lists is not None else None


def run_training(cfg: TrainConfig, reporter: Reporter, work_dir: Path, corpus_name: str | None = None,
                 examples: tuple | None = None) -> dict:
    """Evaluate the base model, train, evaluate again, save the model to work_dir/'model'. `corpus_name`: the corpus
    as the user named it (an upload's file name) for the model card, where cfg.corpus is a content-hash copy.
    `examples`: the (dataset, stats) the recipe's builder made for this config elsewhere (a sweep on Ray mines once
    for the points that share them), used instead of building them here.

    The evaluation history (reporter.log_eval) spans the run: the before-evaluation at step 0, the in-training ones,
    and the after-evaluation at the last step, where the trainer does not evaluate. From the first step on, eta_s
    is the whole run's time left (core.training.eta). With select_split, the model evaluated after training and
    saved is the checkpoint selection kept (core.training.selection), recorded in the result's "selection".

    The caller renames work_dir into place only when this returns, so a failed or cancelled run leaves
    nothing exportable. Raises Cancelled when the reporter asked to stop.

    Under DDP this is every rank's body: rank 0 does all of the above and shares its examples; the other ranks
    train in step with it (_train_follower) and return no result.
    """
    _check_world(cfg)
    if not distributed.is_main():
        return _train_follower(cfg, work_dir)
    recipe = get_recipe(cfg.recipe)
    timings: dict[str, float] = {}
    t0 = time.monotonic()

    def phase(name: str, eta_s: float | None = None):
        # progress fields merge, so clear the previous phase's counters
        reporter.progress(phase=name, step=None, total=None, unit=None, eta_s=eta_s)

    phase("loading corpus and models")
    corpus = load_run_corpus(cfg)
    sts = load_pairs(cfg.sts_corpus) if cfg.sts_corpus else None
    select = selection_pairs(cfg, sts)
    if cfg.eval_every > 0 and not kind_of(corpus).judged:  # the in-training evaluator scores P@k and S@k
        raise UserError("Evaluation during training (eval_every) is available for labelled corpora only; set it to 0.")
    model = load_model(cfg.model, _device(cfg))
    if (cfg.reference or cfg.model) == cfg.model:  # a copy in memory: as good as a second load, and quicker
        reference = copy.deepcopy(model)  # its attributes too (contrastlab_source)
    else:
        reference = load_model(cfg.reference, _device(cfg))
    reference.requires_grad_(False)
    settings = eval_settings(cfg)

    if recipe.lists is not None:
        phase("building lists")
    lists = build_lists(cfg, corpus, reference,
                        lambda d, t: reporter.progress(phase="lists: encoding", step=d, total=t))
    base_is_reference = (cfg.reference or cfg.model) == cfg.model
    timings["load_s"] = time.monotonic() - t0

    def before_progress(name: str, done: int, total: int) -> None:
        reporter.progress(phase=f"evaluating before: {name}", step=done, total=total, unit="texts")

    t_before = time.monotonic()
    phase("evaluating before training")
    before_timing: dict = {}
    base = reference if base_is_reference else model  # the weights a top-layers run freezes, as loaded
    with record_frozen_states(base, cfg.top_layers) if cfg.top_layers else nullcontext({}) as frozen:
        before = evaluate_corpus(base, reference, corpus, settings, progress=before_progress, model_name=cfg.model,
                                 sts=sts, lists=lists, timing=before_timing)
    reporter.progress(metrics_before=before)
    reporter.log_eval({"step": 0, **_scores(before)})
    timings["evaluate_before_s"] = time.monotonic() - t_before

    t1 = time.monotonic()
    phase("preparing examples")
    dataset, example_stats = examples or recipe.build_examples(
        cfg, corpus if lists is None else lists, reference,
        progress=lambda d, t: reporter.progress(phase="examples: encoding", step=d, total=t))
    dataset, example_stats = distributed.share_examples(dataset, example_stats)
    _check_batches(cfg, len(dataset))
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
    with _top_layers(model, cfg, corpus, settings, dataset, reporter, frozen):
        frozen.clear()  # the view holds its own copy now
        timings["frozen_states_s"] = time.monotonic() - t_states
        loss = recipe.build_loss(model, cfg)
        evaluator = TradeoffEvaluator(corpus, reference, settings) if cfg.eval_every > 0 else None
        eval_texts = [text for texts in evaluation_texts(corpus, settings, sts, lists) for text in texts]
        eta = _run_eta(cfg, model, dataset, before_timing, len(eval_texts))
        eta.work = work_curve(eval_texts)
        selection = CheckpointSelection(select, cfg.select_every, reporter.progress) if select is not None else None
        trainer = make_trainer(cfg, model, loss, dataset, work_dir / "trainer", reporter, evaluator, eta, selection)
        reporter.progress(phases=recipe.phases(cfg, total_steps(cfg, len(dataset))))
        t2 = time.monotonic()
        # threads sized to others' load at the start; training forwards packed (core.training.packing)
        with threads_for_free_cores() if str(model.device) == "cpu" else nullcontext(), packed_training(model):
            train_out = trainer.train()  # with selection, the model now holds the kept checkpoint
        distributed.training_ended(train_out.global_step)
        timings["train_s"] = time.monotonic() - t2
        if selection is not None:
            timings["select_s"] = selection.seconds
            timings["train_s"] -= selection.seconds
        collector.release_memory()
        if reporter.should_stop():
            raise Cancelled()

        t3 = time.monotonic()
        share = eta.share()

        def after_progress(name: str, done: int, total: int) -> None:
            elapsed = time.monotonic() - t3
            share.update(name, done, total, elapsed)
            reporter.progress(step=share.done, total=share.total, unit="texts",
                              eta_s=_rounded(eta.final(elapsed, share.fraction, share.since or (0.0, 0.0))))

        phase("evaluating after training", _rounded(eta.final(0.0, 0.0)))
        after = evaluate_corpus(model, reference, corpus, settings, progress=after_progress,
                                model_name=f"{cfg.model} + {cfg.recipe}", sts=sts, lists=lists,
                                layers=not cfg.top_layers)
        timings["evaluate_after_s"] = time.monotonic() - t3
        reporter.log_eval({"step": int(train_out.global_step), **_scores(after)})
    result = {
        "before": before,
        "after": after,
        "examples": example_stats,
        "freeze": freeze_stats,
        "train_loss": float(train_out.training_loss),
        "steps": int(train_out.global_step),
        "world_size": cfg.world_size,
        "effective_batch_size": cfg.effective_batch_size,
        **({"derived": derived} if (derived := recipe.derived(cfg)) else {}),
        **({"selection": selection.record()} if selection is not None else {}),
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "corpus": {**corpus.summary(), **({"name": corpus_name} if corpus_name else {})},
        **({"lists": lists.summary()} if lists is not None and lists is not corpus else {}),
    }
    phase("saving the model", _rounded(eta.saving(0.0)))
    t4 = time.monotonic()
    save_model(model, work_dir / "model", cfg, result)
    result["timings"]["save_s"] = round(time.monotonic() - t4, 2)
    return result


def _check_world(cfg: TrainConfig) -> None:
    """The run trains in as many processes as its config says: the batch per step, the learning-rate schedule and
    the model card all count on it."""
    if cfg.world_size != distributed.world_size():
        raise UserError(f"This run is set to train over {cfg.world_size} processes (nproc {cfg.nproc} x nnodes "
                        f"{cfg.nnodes}) but was started in {distributed.world_size()}; start it with `python -m core "
                        "train --nproc ...` or the Train page, or set nproc and nnodes to 1 (sweeps and quick runs "
                        "train in one process).")


def _device(cfg: TrainConfig) -> str | None:
    """The device this process trains on: the config's, or under DDP its rank's own (core.training.distributed)."""
    return cfg.device if cfg.world_size == 1 else distributed.rank_device(cfg.device, cfg.nproc)


def _check_batches(cfg: TrainConfig, n_examples: int) -> None:
    """Under DDP a partial last batch is dropped, so the examples must fill at least one batch on every process."""
    if cfg.world_size > 1 and n_examples < cfg.effective_batch_size:
        raise UserError(f"{n_examples} examples do not fill one batch of {cfg.batch_size} on each of "
                        f"{cfg.world_size} processes ({cfg.effective_batch_size} examples a step); raise examples, "
                        "or lower batch_size or nproc.")


def _train_follower(cfg: TrainConfig, work_dir: Path) -> dict:
    """A DDP rank other than 0: the model prepared as rank 0 prepares it, rank 0's examples, and training in step
    with it (cancel arrives through distributed.StopSync). Rank 0 evaluates and saves, so nothing is kept here."""
    recipe = get_recipe(cfg.recipe)
    model = load_model(cfg.model, _device(cfg))
    dataset, _stats = distributed.share_examples()  # too few rows for a batch each: rank 0 fails the run
    model = set_pooling(model, cfg.pooling)
    freeze(model, cfg.freeze_embeddings, cfg.freeze_layers)
    loss = recipe.build_loss(model, cfg)
    evaluator = _ServedElsewhere() if cfg.eval_every > 0 else None
    with packed_training(model):  # as rank 0 trains
        train_out = make_trainer(cfg, model, loss, dataset, work_dir / "trainer", None, evaluator).train()
    distributed.training_ended(train_out.global_step)
    return {"steps": int(train_out.global_step)}


def save_model(model, path: Path, cfg: TrainConfig, result: dict) -> None:
    """Save as a sentence-transformers directory whose model card leads with the run (core.training.card), with the
    run's config beside it."""
    save_with_card(model, path, cfg, result)
    (path / "contrastlab_config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    remember_fingerprint(path, lambda: model)  # `layers --compare RUN` then reads its states without loading it


def run_job(ctx) -> dict:
    """Worker entry point (core.jobs.worker.JOBS['train']): train into the run's temp dir, then publish."""
    cfg = TrainConfig.from_dict(ctx.config)
    work = ctx.tmp_dir()
    result = run_training(cfg, ctx, work, corpus_name=ctx.store.get(ctx.run_id).corpus_name)
    return record_result(ctx, result, work / "model")


def record_result(ctx, result: dict, model_dir: Path) -> dict:
    """What a finished training leaves in its run (a JobContext): metrics before, the summary, the model staged as
    its artefact; returns the metrics after. Also used by a sweep on Ray for the result a task sent back."""
    ctx.store.set_metrics_before(ctx.run_id, result["before"])
    ctx.progress(phase="done", summary={k: v for k, v in result.items() if k not in ("before", "after")})
    ctx.commit_artefact("model", model_dir)
    return result["after"]
