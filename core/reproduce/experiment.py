"""What a reproduction is: a seed paper's headline experiment as a few training runs (arms) on files of a data
folder, and the rows it reports, each a claim with the paper's figure beside ours, our 95% interval and what we do
differently. The experiments themselves (one module each) only declare arms and rows; core.reproduce.job runs
them as runs of the store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError


@dataclass(frozen=True)
class Source:
    """A file of the data folder an experiment reads, and what it must hold (for the help and the error);
    `full_only`: only the full run's arms read it, so a --quick run does not ask for it."""

    file: str
    holds: str
    full_only: bool = False

    @property
    def described(self) -> str:
        """What it must hold, and when it is read where that is not always."""
        return self.holds + ("; read by the full run only" if self.full_only else "")


@dataclass(frozen=True)
class Arm:
    """One training run of the experiment: a label and its run config (TrainConfig keys; the job adds the model)."""

    label: str
    config: dict


@dataclass(frozen=True)
class Setup:
    """How a reproduction is run: `quick` (a small budget) or the experiment's full one, and the model trained."""

    quick: bool
    model: str

    @property
    def model_name(self) -> str:
        return Path(self.model).name


@dataclass(frozen=True)
class Outcome:
    """A finished arm: its run id, its stored config (every default filled in) and its evaluations."""

    run_id: str
    config: dict
    before: dict
    after: dict


@dataclass(frozen=True)
class Row:
    """A claim with the paper's figure (None where the paper gives none, e.g. a trend read off a figure), ours with
    its 95% interval, and the settings that differ from the paper's ('' where none do)."""

    claim: str
    published: float | None
    ours: float | None
    ci_low: float | None
    ci_high: float | None
    differs: str


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    paper: str  # the seed and what it reports, in one line
    sources: tuple[Source, ...]
    arms: Callable[[Path, Setup], list[Arm]]  # (data folder, setup) -> the runs to train
    rows: Callable[[dict[str, Outcome], Setup], list[Row]]  # (outcome per arm label, setup) -> the table

    def paths(self, data: Path, quick: bool) -> dict[str, Path]:
        """The files in `data` that a run (--quick or full) reads; UserError naming the first one missing."""
        sources = [s for s in self.sources if not (quick and s.full_only)]
        if not data.is_dir():
            raise UserError(f"Data folder {data} does not exist; give the folder that holds "
                            f"{', '.join(s.file for s in sources)}.")
        out = {}
        for source in sources:
            path = data / source.file
            if not path.is_file():
                raise UserError(f"reproduce {self.name} needs {source.file} in {data} ({source.described}); it is "
                                f"missing.")
            out[source.file] = path.resolve()
        return out


def figure(metrics: dict, key: str, scale: float = 1.0) -> tuple[float | None, float | None, float | None]:
    """(value, ci low, ci high) of one evaluation figure, times `scale`: P@k and S@k keep their bootstrap interval
    under "uncertainty", every other figure beside itself as `<key>_ci` (core.evaluation.corpus_eval)."""
    value = metrics.get(key)
    ci = (metrics.get("uncertainty") or {}).get(f"{key}_ci") or metrics.get(f"{key}_ci") or (None, None)
    scaled = [None if v is None else float(v) * scale for v in (value, *ci)]
    return scaled[0], scaled[1], scaled[2]


def row(claim: str, published: float | None, metrics: dict, key: str, differs: str = "",
        scale: float = 1.0) -> Row:
    """A row of `key` in `metrics` (an arm's before or after evaluation)."""
    return Row(claim, published, *figure(metrics, key, scale), differs)
