"""How fast this machine encodes with a model of a given architecture, measured whenever an evaluation encodes:
so a run's ETA knows how long its evaluations take before the first one under way has said so (a before-evaluation
read from the cache encodes nothing)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

import torch

from core.storage import encode_rates_file, write_atomic

MIN_TEXTS = 128  # fewer texts timed than this say little about the rate (start-up, one batch's padding)


def rate_key(model) -> str:
    """The architecture and where it runs, not the weights: a fine-tuned model encodes at its base model's rate."""
    text = f"{model}|{model.device}|{torch.get_num_threads()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_rate(model) -> float | None:
    """Texts per second this machine last measured for the model's architecture, None if never."""
    try:
        value = json.loads(encode_rates_file().read_text()).get(rate_key(model))
    except (OSError, ValueError, AttributeError):  # none yet, or a garbled file: as if never measured
        return None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def record_rate(model, texts_per_s: float) -> None:
    """Keep a measured rate for later runs (the latest measurement wins)."""
    path = encode_rates_file()
    try:
        rates = json.loads(path.read_text())
        rates = rates if isinstance(rates, dict) else {}
    except (OSError, ValueError):
        rates = {}
    rates[rate_key(model)] = round(texts_per_s, 3)
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(rates)))


class EncodeClock:
    """Times the encoding an evaluation reports through its progress calls (phase, done, total): from each phase's
    first report to its last, so the first batch's start-up is left out of the rate, and `texts` counts every text
    encoded. `clock` is injectable so tests need no real time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._spans: dict[str, list[float]] = {}  # phase -> [first time, first done, last time, last done]

    def update(self, name: str, done: int, total: int) -> None:
        now = self.clock()
        span = self._spans.setdefault(name, [now, float(done), now, float(done)])
        span[2], span[3] = now, float(done)

    @property
    def texts(self) -> int:
        return int(sum(span[3] for span in self._spans.values()))

    def rate(self) -> float | None:
        """Texts per second over the timed spans; None when too few texts were timed."""
        timed = sum(span[3] - span[1] for span in self._spans.values())
        seconds = sum(span[2] - span[0] for span in self._spans.values())
        return timed / seconds if timed >= MIN_TEXTS and seconds > 0 else None

    def startup_s(self, started: float) -> float:
        """Seconds between `started` and the first text's encoding (workers starting, the model shipped to them):
        a one-off that a later evaluation with warm workers does not pay, so it is neither encoding nor scoring."""
        if not self._spans or (rate := self.rate()) is None:
            return 0.0
        first, done = min((span[0], span[1]) for span in self._spans.values())
        return max(first - started - done / rate, 0.0)

    def encode_s(self) -> float:
        """Seconds the encoding took, all of it (the untimed first batches at the measured rate)."""
        rate = self.rate()
        if rate is None:
            return sum(span[2] - span[0] for span in self._spans.values())
        return self.texts / rate
