"""How long a training run has left, as a whole: its remaining steps, the evaluations still to come and saving the
model, each from what this run measured. Pure arithmetic (durations in, seconds out), so it is tested without a
clock; core.training.trainer feeds it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# A training step runs its texts forward and backward; the backward pass costs about two forward passes, so an
# evaluation's forward-only encoding of a text costs about a third of what that text costs in a training step.
FORWARD_BACKWARD = 3.0
SAVE_BYTES_PER_S = 150e6  # a modest disk's write rate: the weights dominate what saving writes
SAVE_FIXED_S = 0.5  # tokenizer files, config and model card
PACE_SHARE = 0.1  # an evaluation's own pace is trusted once this share of its work is done
# A text's cost in an encode, in characters: its own plus a fixed part (special tokens, per-text pooling and copying)
TEXT_OVERHEAD_CHARS = 10


def fmt_seconds(seconds: float | None) -> str:
    """A duration as the pages and notes show it: seconds, minutes or hours, whichever reads best."""
    if seconds is None:
        return "–"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def phase_text(status: str, progress: dict) -> str:
    """What a run is doing, in words, for the page's bar and the CLI's alike: the phase its process reports (a DDP
    launcher's while it waits for the other nodes, too); before that, a queued run waits for its worker, whose
    libraries' imports alone take several seconds on a laptop (so the wait is named, not a blank bar)."""
    return progress.get("phase") or ("waiting for the worker process to start" if status == "queued" else "starting")


def seconds_left(progress: dict, now: float) -> float | None:
    """The run's time left as of `now` (wall clock): the worker's last estimate (eta_s) less the time since it made
    it (eta_at), so a display between two reports counts down instead of freezing (saving a model reports once);
    None where the worker gave no estimate. Never below zero: a phase that overruns its estimate stays at 0."""
    eta, at = progress.get("eta_s"), progress.get("eta_at")
    if not isinstance(eta, int | float) or not math.isfinite(eta):
        return None
    since = now - at if isinstance(at, int | float) and math.isfinite(at) else 0.0
    return max(float(eta) - max(since, 0.0), 0.0)


def run_fraction(started: float | None, left: float | None, now: float) -> float | None:
    """The share of the whole run done, from its elapsed time and its time left; None without both. What the
    progress bar shows once the worker estimates the run's end, so it does not fall back to 0 when a phase (the
    evaluation after training, saving) starts counting anew."""
    if started is None or left is None:
        return None
    elapsed = max(now - started, 0.0)
    return elapsed / (elapsed + left) if elapsed + left > 0 else 1.0


def save_seconds(weight_bytes: int) -> float:
    """Expected seconds to save a model whose weights take `weight_bytes`: saving is writing them once."""
    return SAVE_FIXED_S + max(weight_bytes, 0) / SAVE_BYTES_PER_S


def _finite(value: float) -> float:
    """A measured duration or share as a usable number: non-finite or negative counts as nothing measured."""
    return value if math.isfinite(value) and value > 0 else 0.0


@dataclass
class RunEta:
    """Seconds until a training run is done, in every phase after training starts.

    The rest of training is the remaining steps at the seconds per step measured so far, evaluations excluded, and
    counted from the first step on once there is a second: the first carries one-off set-up (allocations, lazy
    initialisation) that the rest will not. The evaluations to come are the in-training ones (every `eval_every`
    steps, never at the last step: the evaluation after training scores that model) and the one after training.
    One evaluation takes:
    - the mean duration of the in-training evaluations measured in this run, once there is one: the after-evaluation
      encodes the same texts with the same model;
    - before that, `eval_s`: the before-evaluation's scoring time plus its `eval_texts` encoded at the rate this
      machine measured for this architecture (core.models.rates), whether or not the before-evaluation itself came
      from the cache;
    - with no rate measured yet, the scoring time `score_s` plus the encoding at the rate training measures: a step
      encodes `texts_per_step` texts forward and backward (FORWARD_BACKWARD forward passes' worth), so `eval_texts`
      texts take eval_texts / texts_per_step * step_s / FORWARD_BACKWARD. Evaluation batches are larger and padded
      less than training's, so if anything this errs long.
    Saving takes `save_s` (save_seconds). After cancel() nothing more runs, so every estimate is 0.
    """

    total_steps: int
    eval_every: int = 0
    eval_s: float | None = None
    score_s: float = 0.0
    eval_texts: int = 0
    texts_per_step: int = 0
    save_s: float = 0.0
    evaluations: list[float] = field(default_factory=list)  # durations of the in-training evaluations so far
    step_s: float | None = None  # seconds per training step, evaluations excluded (the latest measurement)
    cancelled: bool = False
    first: tuple[int, float] | None = None  # (step, training seconds) at the first measurement
    work: Callable[[float], float] | None = None  # an evaluation's work curve (work_curve), for its EncodeShare

    def share(self) -> EncodeShare:
        """A new tally of one evaluation's progress."""
        return EncodeShare(self.eval_texts, self.work)

    def add_evaluation(self, seconds: float) -> None:
        """Record an in-training evaluation's duration."""
        self.evaluations.append(_finite(seconds))

    def cancel(self) -> None:
        self.cancelled = True

    def evaluation_s(self) -> float:
        """Expected seconds of one evaluation (see the class docstring)."""
        if self.evaluations:
            return sum(self.evaluations) / len(self.evaluations)
        if self.eval_s is not None:
            return _finite(self.eval_s)
        score = _finite(self.score_s)
        if self.step_s is None or self.texts_per_step <= 0:
            return score
        return score + self.eval_texts / self.texts_per_step * self.step_s / FORWARD_BACKWARD

    def evaluations_left(self, step: int) -> int:
        """In-training evaluations after `step`: one at each multiple of eval_every below the last step."""
        if self.eval_every <= 0:
            return 0
        step = min(max(step, 0), self.total_steps)
        return max(0, (self.total_steps - 1) // self.eval_every - step // self.eval_every)

    def after_step(self, step: int) -> float:
        """Seconds after `step` is done (and its own evaluation, if any): the remaining steps, the in-training
        evaluations after it, the evaluation after training and saving."""
        if self.cancelled:
            return 0.0
        step = min(max(step, 0), self.total_steps)
        steps = (self.total_steps - step) * (self.step_s or 0.0)
        return steps + (self.evaluations_left(step) + 1) * self.evaluation_s() + _finite(self.save_s)

    def training(self, step: int, train_s: float) -> float | None:
        """Seconds left once `step` steps took `train_s` seconds of training (evaluations excluded); None before
        the first step is measured."""
        if self.cancelled:
            return 0.0
        train_s = _finite(train_s)
        if step <= 0 or train_s == 0.0:
            return None
        if self.first is None or step <= self.first[0]:
            self.first = (step, train_s)
            self.step_s = train_s / step
        elif train_s > self.first[1]:
            self.step_s = (train_s - self.first[1]) / (step - self.first[0])
        return self.after_step(step)

    def evaluating(self, step: int, elapsed_s: float, fraction: float,
                   since: tuple[float, float] = (0.0, 0.0)) -> float | None:
        """Seconds left during the in-training evaluation at `step`, `elapsed_s` into it, `fraction` of its texts
        encoded (its pace counted from `since`, EncodeShare.since); None while no step time is known."""
        if self.cancelled:
            return 0.0
        if self.step_s is None:
            return None
        return self._rest(elapsed_s, fraction, since) + self.after_step(step)

    def final(self, elapsed_s: float, fraction: float, since: tuple[float, float] = (0.0, 0.0)) -> float:
        """Seconds left during the evaluation after training: the rest of it and saving."""
        if self.cancelled:
            return 0.0
        return self._rest(elapsed_s, fraction, since) + _finite(self.save_s)

    def saving(self, elapsed_s: float) -> float:
        return 0.0 if self.cancelled else max(_finite(self.save_s) - _finite(elapsed_s), 0.0)

    def _rest(self, elapsed_s: float, fraction: float, since: tuple[float, float] = (0.0, 0.0)) -> float:
        """The rest of an evaluation under way: the estimate's unfinished share, or, when it runs slower than
        estimated, the unfinished share at its own pace. The pace is measured from `since` (elapsed seconds, share
        done at the first batch's report), so start-up does not count as encoding, and only once PACE_SHARE more
        is done: at 1 % done a second of start-up would be multiplied by a hundred."""
        expected, elapsed = self.evaluation_s(), _finite(elapsed_s)
        share = min(_finite(fraction), 1.0)
        paced_s, paced = elapsed - min(_finite(since[0]), elapsed), share - min(_finite(since[1]), share)
        if paced < PACE_SHARE:
            return max(expected * (1 - share), expected - elapsed, 0.0)
        return max(expected * (1 - share), paced_s * (1 - share) / paced)


def work_curve(texts: Sequence[str]) -> Callable[[float], float]:
    """The share of an encode's work done once a share q of its texts is encoded: encode batches longest first
    (core.models.encode.longest_first), so the first tenth of SST-2's texts holds about a quarter of the work, and
    a pace counted in texts predicted twice the time left. A text's cost is its length in characters plus
    TEXT_OVERHEAD_CHARS; an encode of a sample of these texts has the same curve."""
    costs = sorted((len(t) + TEXT_OVERHEAD_CHARS for t in texts), reverse=True)
    total, cumulative = float(sum(costs)), [0.0]
    for cost in costs:
        cumulative.append(cumulative[-1] + cost)
    if not costs:
        return lambda q: min(max(q, 0.0), 1.0)

    def curve(q: float) -> float:
        position = min(max(q, 0.0), 1.0) * len(costs)
        whole = min(int(position), len(costs) - 1)
        return (cumulative[whole] + (position - whole) * costs[whole]) / total

    return curve


class EncodeShare:
    """The share of an evaluation's work done so far, from its encode progress calls (phase name, done, total):
    each phase's share of its texts through `work` (work_curve; texts count alike without one), weighted by the
    phase's texts, out of `texts` (what one evaluation encodes) or the phases' totals where larger. `done` and
    `total` count texts, as the progress bar shows them."""

    def __init__(self, texts: int, work: Callable[[float], float] | None = None) -> None:
        self.texts = max(texts, 0)
        self.work = work or (lambda q: q)
        self._done: dict[str, int] = {}
        self._total: dict[str, int] = {}
        self.since: tuple[float, float] | None = None  # (elapsed s, share) at the first report: where pace starts

    def update(self, name: str, done: int, total: int, elapsed_s: float = 0.0) -> float:
        """Record a progress call `elapsed_s` into the evaluation; returns the share done."""
        self._done[name], self._total[name] = done, total
        if self.since is None:
            self.since = (elapsed_s, self.fraction)
        return self.fraction

    @property
    def done(self) -> int:
        return sum(self._done.values())

    @property
    def total(self) -> int:
        return max(self.texts, sum(self._total.values()))

    @property
    def fraction(self) -> float:
        if not self.total:
            return 0.0
        work = sum(total * self.work(self._done[name] / total) for name, total in self._total.items() if total)
        return min(work / self.total, 1.0)


def planned_seconds(steps: int, texts_per_step: int, eval_texts: int, rate: float, save_s: float = 0.0) -> float:
    """Seconds a run of `steps` steps takes, before it starts, from this machine's encoding rate alone (texts per
    second, core.models.rates): the evaluation before training, each step's texts forward and backward
    (FORWARD_BACKWARD forward passes' worth, as RunEta counts a step before it measures one), the evaluation after
    and saving. Training texts longer than the evaluated ones (crops of two long sentences) make it err short."""
    eval_s = eval_texts / rate
    eta = RunEta(total_steps=steps, eval_s=eval_s, step_s=texts_per_step * FORWARD_BACKWARD / rate, save_s=save_s)
    return eval_s + eta.after_step(0)
