"""What a reproduction is: a seed paper's headline experiment as a few training runs (arms) on files of a data
folder, and the rows it reports, each a claim with the paper's figure beside ours, our 95% interval and what we do
differently. The experiments themselves (one module each) only declare arms and rows; core.reproduce.job runs
them as runs of the store.

A claim that "A beats B" is a DIFFERENCE row: both arms scored the same test items, so it carries the paired 95%
interval and p-value of core.evaluation.paired, and the paper's figure beside it is the paper's difference for the
same comparison, its model and benchmark named. A FIGURE row is one evaluation's number; the paper's absolute figure
stands beside it only where it is comparable (the same model, benchmark and metric), otherwise it moves to the row's
note: a Mistral-7B MTEB average beside a MiniLM STS-B Spearman would read as a reproduction it is not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import UserError


@dataclass(frozen=True)
class Source:
    """A file of the data folder an experiment reads, and what it must hold (for the help and the error);
    `full_only`: only the full run's arms read it, so a --quick run does not ask for it; `targets`: the split whose
    rows its rows are named after ("SST-2 validation"), which an arm training on it must score, not a hold-out."""

    file: str
    holds: str
    full_only: bool = False
    targets: str | None = None

    @property
    def described(self) -> str:
        """What it must hold, and when it is read where that is not always."""
        return self.holds + ("; read by the full run only" if self.full_only else "")


@dataclass(frozen=True)
class Generation:
    """The data a reproduction writes with a language model when given --generator, as its paper did: `kind`
    ("lists" or "negatives") from the distinct `column` texts of `source`'s train rows, trained through the recipe
    setting `param`; `paper` says what the paper generated, `substitute` what the arms train on without it."""

    kind: str
    source: str
    column: str
    param: str
    paper: str
    substitute: str


@dataclass(frozen=True)
class Validation:
    """Arms chosen among on held-out rows, not on test (core.reproduce.validation): `share` of `source`'s training
    rows (per label, seeded) become validation rows no arm trains on, and the arms whose label starts with
    `candidates` are scored on them by `metric`."""

    source: str
    share: float
    candidates: str
    metric: str


@dataclass(frozen=True)
class Arm:
    """One training run of the experiment: a label and its run config (TrainConfig keys; the job adds the model)."""

    label: str
    config: dict


@dataclass(frozen=True)
class Setup:
    """How a reproduction is run: `quick` (a small budget) or the experiment's full one, the model trained, and the
    settings an experiment may offer (None: its own default): lists per optimiser step and the split of the STS
    corpus that picks each arm's checkpoint (core.reproduce.listmle)."""

    quick: bool
    model: str
    lists_per_step: int | None = None
    select_split: str | None = None
    generator: str | None = None  # a local LM folder or an OpenAI-compatible URL (--generator)
    generator_model: str | None = None  # the served model at that URL (--generator-model; default: the one listed)
    generated: dict | None = None  # once written: the file's generation summary (core.data.provenance)

    @property
    def model_name(self) -> str:
        return Path(self.model).name

    def trained_on(self, generation: Generation) -> str:
        """What the arms trained on, for the rows' setting column: the generated file in words, or the substitute
        named as one (and how to get the paper's data)."""
        if self.generated is None:
            return f"{generation.substitute}, a substitute for {generation.paper} (pass --generator to write them)"
        from core.data.provenance import generation_text

        return f"{generation_text(self.generated)}; the paper: {generation.paper}"


@dataclass(frozen=True)
class Outcome:
    """A finished arm: its run id, its stored config (every default filled in), its evaluations and its run's summary
    (what training recorded beside them, e.g. the checkpoint selection kept), and its validation figures where the
    experiment has them."""

    run_id: str
    config: dict
    before: dict
    after: dict
    summary: dict = field(default_factory=dict)
    validation: dict = field(default_factory=dict)  # its figures on held-out validation rows, where the experiment
    # chooses among arms on them (Experiment.validation)


@dataclass(frozen=True)
class Paper:
    """A figure of the paper and the setting it was measured in ("SynCSE-r, BERT-base, average of 7 STS tasks");
    `comparable`: our row measures the same thing with the same model on the same benchmark and metric."""

    value: float
    setting: str
    comparable: bool = False


@dataclass(frozen=True)
class Row:
    """A claim with the paper's figure (None where the paper gives none, e.g. a trend read off a figure, or where it
    is not comparable with a figure of ours), ours with its 95% interval, and the settings that differ from the
    paper's ('' where none do). `kind` "difference": ours is b - a of two arms on the same items, with its paired
    p-value; `setting` names where the paper's figure comes from."""

    claim: str
    published: float | None
    ours: float | None
    ci_low: float | None
    ci_high: float | None
    differs: str
    kind: str = "figure"
    p_value: float | None = None
    comparable: bool = False
    setting: str = ""


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    paper: str  # the seed and what it reports, in one line
    sources: tuple[Source, ...]
    arms: Callable[[Path, Setup], list[Arm]]  # (data folder, setup) -> the runs to train
    rows: Callable[[dict[str, Outcome], Setup], list[Row]]  # (outcome per arm label, setup) -> the table
    options: tuple[str, ...] = ()  # the Setup settings it reads beside quick and model (e.g. "lists_per_step")
    generation: Generation | None = None  # what --generator writes for it; None: it takes no generator
    validation: Validation | None = None  # arms it chooses among on held-out training rows, not on test

    def paths(self, data: Path, quick: bool) -> dict[str, Path]:
        """The files in `data` that a run (--quick or full) reads; UserError naming the first one missing."""
        sources = [s for s in self.sources if not (quick and s.full_only)]
        if data.is_file():
            raise UserError(f"--data names a file; give the folder that holds "
                            f"{' and '.join(s.file for s in sources)}: {data.parent}.")
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


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def row(claim: str, paper: Paper | None, metrics: dict, key: str, differs: str = "", scale: float = 1.0) -> Row:
    """A figure row of `key` in `metrics` (an arm's before or after evaluation); the paper's figure beside it only
    where it is comparable, else named in the note."""
    if paper is not None and not paper.comparable:
        note = f"paper: {paper.value:g} ({paper.setting}), not comparable"
        return Row(claim, None, *figure(metrics, key, scale), _joined(differs, note), setting=paper.setting)
    return Row(claim, None if paper is None else paper.value, *figure(metrics, key, scale), differs,
               comparable=paper is not None, setting="" if paper is None else paper.setting)


def difference(claim: str, paper: Paper | None, a: dict, b: dict, key: str, differs: str = "",
               scale: float = 1.0) -> Row:
    """A difference row: figure `key` of evaluation b minus a (two arms, or one arm after minus before) on the same
    test items, with its paired 95% interval and p-value (core.evaluation.paired); where the two cannot be compared
    (other items, another judge or k; too few items for an interval) the note says why."""
    from core.evaluation.paired import compared

    result = compared(a, b)
    found = next((d for d in result["metrics"] if d["name"] == key), None)
    notes = [n for n in result["notes"] if n.startswith(_figure_name(key, a))]
    if found is None:
        values: tuple = (None, None, None, None)
    else:
        bounds = (None if v is None else v * scale for v in (found["ci_low"], found["ci_high"]))
        values = (found["delta"] * scale, *bounds, found["p_value"])
    return Row(claim, None if paper is None else paper.value, *values[:3], _joined(differs, *notes),
               kind="difference", p_value=values[3], comparable=paper is not None and paper.comparable,
               setting="" if paper is None else paper.setting)


def _figure_name(key: str, result: dict) -> str:
    from core.evaluation.paired import figure_name

    return figure_name(key, result)
