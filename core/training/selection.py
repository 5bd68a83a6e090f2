"""Checkpoint selection (docs/definitions.md, Checkpoint selection): a run with `select_split` keeps, of the model
before training (step 0) and the checkpoints it scores while training, the one with the best STS Spearman on that
split of its STS corpus. Why: a post-training objective can make a model worse as it goes on (ListMLE at tau = 1
drifts), and a published figure is read at a selected checkpoint; picking it on validation pairs, never on the pairs
the run reports, keeps the reported figure honest.

The callback scores in this process with the project's own encoder (core.evaluation.sts), keeps a CPU copy of the
best weights and loads them back when training ends, so the evaluation after training, the saved model and its card
all describe the kept checkpoint. Under DDP only rank 0 runs it (the others wait for it at the next step), as rank 0
alone evaluates and saves.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from scipy.stats import ConstantInputWarning
from transformers import TrainerCallback

from core.data.pairs import PairCorpus, load_pair_split
from core.data.table import VALIDATION_NAMES
from core.errors import UserError, shorten
from core.evaluation.sts import pair_texts, sts_spearman
from core.training.config import SELECT_POINTS, TrainConfig


def selection_pairs(cfg: TrainConfig, sts: PairCorpus | None) -> PairCorpus | None:
    """The pairs a run with select_split scores its checkpoints on (None without select_split), or one UserError
    line: the STS corpus must have that split, with scores that are not all equal, and it must not be, or hold, the
    pairs the run reports (`sts`'s target split). Read when a run starts, before any model is loaded; TrainConfig
    checks what needs no file."""
    if not cfg.select_split:
        return None
    split, name = cfg.select_split, Path(cfg.sts_corpus).name
    if sts is None or sts.columns.score is None:
        raise UserError(f"sts_corpus {name} has no score column, so no split of it can rank checkpoints by STS "
                        "Spearman; set sts_corpus to a pair file with scores, or leave select_split unset.")
    if _holds_target(split, sts.target_split):
        raise UserError(f"select_split {shorten(split)} holds the {sts.target_split} pairs of {name}, on which the run "
                        "reports STS Spearman: picking the checkpoint on them would make that figure optimistic; "
                        "name another split of it (such as validation).")
    try:
        pairs = load_pair_split(cfg.sts_corpus, split)
    except UserError as exc:
        raise UserError(f"select_split: {exc}") from exc
    if len(set(pairs.test.scores.tolist())) < 2:
        raise UserError(f"Every pair of the {shorten(split)} split of {name} has the same score, so it cannot rank "
                        "checkpoints; check the score column or name another split.")
    return pairs


def _holds_target(split: str, target_split: str) -> bool:
    """Whether the rows of split value `split` are, or hold, a pair corpus's target pairs (core.data.corpus.
    split_by_column): its 'test' rows; every validation value when the target is the validation rows; the 'train'
    rows when the target is a holdout drawn from them."""
    if target_split == "validation":
        return split in VALIDATION_NAMES
    return split == ("train" if target_split == "holdout" else target_split)


class CheckpointSelection(TrainerCallback):
    """Scores the model on `pairs` before the first step (step 0), every `every` optimiser steps (0: SELECT_POINTS
    times over the run) and when training ends; keeps a CPU copy of the best weights, a tie keeping the earlier step,
    and loads them into the model once the last step is scored. A run stopped early (cancelled) scores no more: it
    keeps nothing. `progress` hears the encoding as the run's reporter does; the seconds it takes are kept apart
    (`seconds`, `seconds_left`), so the run's step rate and ETA count them as what they are."""

    def __init__(self, pairs: PairCorpus, every: int = 0, progress: Callable[..., None] | None = None) -> None:
        self.pairs, self.every, self.progress = pairs, every, progress
        self.total: int | None = None  # the run's optimiser steps, known when training begins
        self.points: list[dict] = []
        self.best_step: int | None = None
        self.best: float | None = None
        self.durations: list[float] = []
        self._kept: dict[str, torch.Tensor] | None = None  # the best weights, unless the model holds them

    @property
    def seconds(self) -> float:
        return sum(self.durations)

    def seconds_left(self) -> float:
        """Expected seconds of the scorings still to come: how many are left after the last one, at the mean time of
        those after step 0 (whose base model may come from the embedding cache), else step 0's."""
        if not self.points or self.total is None:
            return 0.0
        done = self.points[-1]["step"]
        left = max(0, (self.total - 1) // self.every - done // self.every) + (done < self.total)
        spent = self.durations[1:] or self.durations
        return left * sum(spent) / len(spent)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.total = state.max_steps
        self.every = self.every or max(1, math.ceil(self.total / SELECT_POINTS))
        self._score(model, state.global_step, last=False)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = state.global_step
        if step % self.every == 0 and step < state.max_steps and not control.should_training_stop:
            self._score(model, step, last=False)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        """The last step is scored here: at max_steps, or where the batches ran out before it (a batch sampler that
        drops what it cannot fill); a run stopped before both was cancelled."""
        step = state.global_step
        if (step >= state.max_steps or not control.should_training_stop) and self.points[-1]["step"] != step:
            self._score(model, step, last=True)
        if self._kept is not None:
            model.load_state_dict(self._kept)
            self._kept = None

    def _score(self, model, step: int, last: bool) -> None:
        """Score the model at `step`; a new best is copied, except at the last step, where the model keeps it."""
        t0 = time.monotonic()
        split = self.pairs.target_split
        if self.progress is not None:
            self.progress(phase=f"checkpoint selection: scoring step {step} on the {split} split", step=0,
                          total=len(pair_texts(self.pairs)), unit="texts")
        report = (lambda done, total: self.progress(step=done, total=total)) if self.progress is not None else None
        with warnings.catch_warnings():  # a wrecked model's equal cosines: recorded as no score, below
            warnings.simplefilter("ignore", ConstantInputWarning)
            value = sts_spearman(model, self.pairs, progress=report)  # encodes in eval mode, then back to training
        value = value if value is not None and math.isfinite(value) else None
        self.points.append({"step": step, "sts_spearman": value})
        if value is not None and (self.best is None or value > self.best):
            self.best, self.best_step = value, step
            self._kept = None  # the previous best's copy goes before the next is made: one copy at a time
            if not last:
                self._kept = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self.durations.append(time.monotonic() - t0)

    def record(self) -> dict:
        """The run result's "selection": the split, how often it scored, every point and the kept one."""
        return {"split": self.pairs.target_split, "pairs": len(self.pairs.test), "every": self.every,
                "points": self.points, "best_step": self.best_step, "best": self.best}
