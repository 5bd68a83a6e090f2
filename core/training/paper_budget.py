"""A recipe's default budget beside the one its paper reports (Recipe.paper_budget): the Train page's note, with
what the paper's budget would take on this machine, so a default kept short for a CPU is a visible choice and not
a silent deviation from the paper."""

from __future__ import annotations

from core.training.eta import fmt_seconds, planned_seconds, save_seconds
from core.training.recipe import Recipe


def _default_budget(recipe: Recipe) -> tuple[int, int, int, float]:
    """(steps, batch size, examples, epochs) of a run of `recipe` left at its defaults, counted as the trainer
    counts them, for as many examples as the default asks for."""
    from core.training.config import TrainConfig
    from core.training.trainer import total_steps  # loads torch: the page has loaded the model by now

    cfg = TrainConfig(corpus="(any)", recipe=recipe.name)  # the budget does not depend on the corpus
    return total_steps(cfg, cfg.examples), cfg.batch_size, cfg.examples, cfg.epochs


def paper_budget_note(recipe: Recipe, rate: float | None, eval_texts: int, save_s: float) -> str | None:
    """One line for the Train page when the recipe's default budget differs from its paper's: both budgets and the
    paper's ETA on this machine (core.training.eta.planned_seconds at `rate` texts per second, with `eval_texts`
    texts per evaluation and `save_s` to save); None for a recipe with no paper budget or whose default matches."""
    paper = recipe.paper_budget
    if paper is None:
        return None
    steps, batch, examples, epochs = _default_budget(recipe)
    if (steps, batch) == (paper.steps, paper.batch_size):
        return None
    unit = "pairs" if paper.texts_per_example == 2 else "examples"
    settings = f"Max steps {paper.steps:,}" + (f" at batch size {paper.batch_size}"
                                               if batch != paper.batch_size else "")
    if rate:
        seconds = planned_seconds(paper.steps, paper.batch_size * paper.texts_per_example, eval_texts, rate, save_s)
        eta = f": about {fmt_seconds(seconds)} on this machine, evaluations included."
    else:
        eta = ("; its time on this machine shows once an evaluation has measured how fast this machine encodes with "
               "this model (e.g. the Corpus page's).")
    return (f"The paper's budget is about {paper.steps:,} batches of {paper.batch_size} ({paper.source}); this "
            f"recipe's default is {steps:,} batch{'' if steps == 1 else 'es'} of {batch} ({examples:,} {unit}, "
            f"{epochs:g} epoch{'' if epochs == 1 else 's'}), to keep a run short. {settings} trains the paper's "
            f"budget{eta}")


def paper_budget_note_for(recipe: Recipe, model, corpus) -> str | None:
    """paper_budget_note for `model` (SentenceTransformer) on `corpus`: the rate this machine last measured for the
    model's architecture (core.models.rates), the texts one evaluation of the corpus encodes, and saving its
    weights."""
    from core.evaluation.corpus_eval import evaluation_texts
    from core.models.rates import encode_rate

    if recipe.paper_budget is None:
        return None
    eval_texts = sum(len(texts) for texts in evaluation_texts(corpus))
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return paper_budget_note(recipe, encode_rate(model), eval_texts, save_seconds(weights))
