"""What one training objective declares, so the trainer, CLI, Train page, sweeps, labels and model card need
nothing else: its settings, its knob, how its examples are built, its loss, batch sampler, budget defaults and
extra trainer callbacks. Built-in recipes live in ``supervised`` and ``self_supervised``; ``recipes`` registers them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from core.errors import UserError
from core.training.examples import mined_examples
from core.training.params import Param


def no_callbacks(_cfg, _loss) -> list:
    return []


def no_phases(_cfg, _total_steps: int) -> list[dict]:
    return []


def no_needs(_cfg, _corpus) -> None:
    return None


def no_derived(_cfg) -> dict:
    return {}


def needs_scores(cfg, corpus) -> str | None:
    """On a pair corpus the cosine-format recipes train on its score column."""
    if corpus.kind == "pairs" and corpus.columns.score is None:
        return (f"{cfg.recipe} on a pair corpus trains on its score column, which {corpus.name} lacks; use a RAOE "
                "recipe with a teacher model.")
    return None


def needs_order(cfg, corpus) -> str | None:
    """CoSENT and AnglE read only the order of a pair corpus's scores, so NLI labels serve where there are none
    (entailment > neutral > contradiction, as the AnglE paper trains on NLI; core.training.examples.scored_pairs)."""
    if corpus.kind == "pairs" and corpus.columns.score is None and corpus.columns.label is None:
        return (f"{cfg.recipe} on a pair corpus trains on the order of its score column, or of its NLI labels; "
                f"{corpus.name} has neither; use a RAOE recipe with a teacher model.")
    return None


@dataclass(frozen=True)
class PaperBudget:
    """The training budget a recipe's paper reports. Declared where the recipe's default budget is smaller (a run
    should take minutes on a CPU), so the Train page can say so and what the paper's budget would take here
    (core.training.paper_budget)."""

    steps: int  # optimiser steps (batches)
    batch_size: int
    source: str  # one line: which paper, and why this budget
    texts_per_example: int = 2  # texts one example puts through the model in a step (a pair: 2), for its ETA


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    example_format: str  # a core.data.mining format, or "crop" / "dropout" for document pairs
    loss: Callable  # (model, TrainConfig) -> a sentence-transformers loss module
    params: tuple[Param, ...] = ()  # the recipe's own settings, next to the general ones of core.training.config
    knob: str | None = None  # the param that sweeps, the trade-off page and run labels vary (a margin or scale)
    examples: Callable = mined_examples  # (cfg, corpus, reference, format, progress) -> (Dataset, stats)
    batch_sampler: str = "batch_sampler"  # a sentence_transformers BatchSamplers value
    budget: dict = field(default_factory=dict)  # general settings whose default differs for this recipe
    min_batch_size: int = 2  # in-batch negatives and pair rankings need two examples; a list loss needs one list
    paper_budget: PaperBudget | None = None  # the budget its paper reports, shown where the default differs
    callbacks: Callable = no_callbacks  # (cfg, loss) -> extra transformers TrainerCallbacks (they may steer the loss)
    phases: Callable = no_phases  # (cfg, total_steps) -> [{"step", "label"}]: where the loss curve marks a change
    shown: tuple[str, ...] = ()  # settings named in run labels beside the knob (e.g. a curriculum's order)
    self_supervised: bool = False
    kinds: tuple[str, ...] = ("labelled",)  # corpus kinds it trains on (core.data.kinds.KINDS)
    needs: Callable = no_needs  # (cfg, corpus) -> a sentence saying what the corpus lacks for this run, or None
    lists: Callable | None = None  # (cfg, corpus, reference, progress) -> the ListCorpus a list recipe learns from;
    # its target lists' ordering metrics are reported before and after
    derived: Callable = no_derived  # (cfg) -> {name: value} the loss takes from the settings (RAOE's I_eff): kept in
    # the run's summary and listed on the model card

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def knob_param(self) -> Param | None:
        return self.param(self.knob) if self.knob else None

    def build_examples(self, cfg, corpus, reference, progress=None):
        """(datasets.Dataset, stats) for cfg; `reference` is the frozen model mining uses (None is fine for
        self-supervised recipes)."""
        return self.examples(cfg, corpus, reference, self.example_format, progress)

    def build_loss(self, model, cfg):
        return self.loss(model, cfg)

    def check_corpus(self, cfg, corpus) -> None:
        """Refuse, before any work, a corpus this run cannot train on (the CLI checks before a worker starts)."""
        from core.data.kinds import kind_of  # pandas and scikit-learn: not needed to list the recipes

        if corpus.kind not in self.kinds:
            raise UserError(f"{self.name} trains on {' or '.join(kind_of(k).title for k in self.kinds)}; this is "
                            f"{kind_of(corpus).title}.")
        missing = self.needs(cfg, corpus)
        if missing:
            raise UserError(missing)


def knob(name: str, label: str, default: float, presets: tuple[float, ...], help: str) -> Param:
    """A margin or scale: a non-negative number, offered as presets that accept a typed value."""
    return Param(name, float, default, label, help, low=0.0, presets=presets)


MINING = (
    Param("mine_k", int, 5, "Neighbours (k)", "Nearest same-label and other-label neighbours per anchor.",
          low=1, high=100),
    Param("threshold", float, 0.5, "Cosine threshold", "Neighbours below it are not used.", low=-1.0, high=1.0,
          step=0.05),
)
