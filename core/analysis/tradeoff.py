"""The P@k / S@k trade-off across runs (docs/definitions.md, P@k and S@k): which runs are worth keeping and
what a margin does to the mined triplets before any training (quick runs: core.jobs.quick)."""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go

from core.data.corpus import Corpus
from core.data.mining import MiningSettings, active_share
from core.errors import UserError
from core.evaluation.evaluate import EvalSettings, eval_sets
from core.evaluation.headline import HEADLINE
from core.evaluation.paired import change_texts
from core.evaluation.published import Published, corpus_keys, published
from core.evaluation.uncertainty import figure_interval, interval
from core.jobs.quick import QUICK_BUDGET, quick_text
from core.models.encode import encode_cached
from core.runs.labels import corpus_names, corpus_path, differences, knob_name, knob_value, run_labels
from core.runs.store import Run, RunStore
from core.training.config import GENERAL_PARAMS, resolved
from core.training.examples import mine_train_sample

# The margin slider's stops: dense where the cosine-distance triplet constraint changes (below ~1), then the
# large margins that are never satisfied (distances lie in [0, 2]).
MARGIN_STEPS = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 7.5, 10.0)

PhaseProgress = Callable[[str, int, int], None]


# --- trade-off points ----------------------------------------------------------------------------------

_SCORES = ("polarity", "polarity_sd", "similarity", "similarity_sd")


def _source(model) -> str:
    """What a loaded model was loaded from (core.models.loading.load_model records it); identity as a fallback."""
    return str(getattr(model, "contrastlab_source", f"model-{id(model)}"))


def _judged_by(run: Run, reference) -> bool:
    """True when the run's stored S@k was judged by this reference model, so its stored scores compare."""
    from core.models.loading import resolve_model

    try:
        return resolve_model(run.config.get("reference") or run.config.get("model")) == _source(reference)
    except UserError:
        return False


def _scored_as(run: Run, k: int, discount: str) -> bool:
    """True when the run's stored P and S were computed at this k with this rank discount (a run saved before the
    discount was a setting used the linear one)."""
    return (run.config.get("eval_k", 16), run.config.get("discount", "linear")) == (k, discount)


def tradeoff_points(
    store: RunStore,
    corpus: Corpus,
    reference,
    k: int = 16,
    load_model: Callable[[str], object] | None = None,
    progress: PhaseProgress | None = None,
    memo: dict | None = None,
    discount: str = "linear",
) -> list[dict]:
    """The reference point and one point per finished train run on this corpus, all at P@k / S@k with this rank
    discount.

    A run's stored metrics are used when they were computed at this k and discount and judged by this reference;
    otherwise its saved model is loaded (`load_model(path)`, e.g. the app's model cache) and scored again,
    which only re-ranks cached embeddings. `memo` (e.g. a session dict) keeps points between calls, so a
    newly finished run adds one evaluation and not one per run.
    """
    from core.evaluation.corpus_eval import evaluate_corpus
    from core.evaluation.evaluate import EvalSettings

    if load_model is None:
        from core.models.loading import load_model as load

        def load_model(path: str):
            return load(path, str(getattr(reference, "device", "cpu")))

    memo = {} if memo is None else memo
    settings = EvalSettings(k=k, discount=discount)
    ref_key = (_source(reference), corpus.fingerprint, k, discount)
    runs = store.finished(corpus.fingerprint)[::-1]  # oldest first: the legend follows the order of training
    points = []
    for i, run in enumerate([None, *runs]):
        key = (*ref_key, run.id if run else "reference")
        if key not in memo:
            if progress:
                progress("scoring runs", i, len(runs) + 1)
            if run is None:
                metrics = evaluate_corpus(reference, reference, corpus, settings, progress=progress)
            elif _scored_as(run, k, discount) and _judged_by(run, reference):
                metrics = run.metrics_after
            else:
                metrics = evaluate_corpus(load_model(run.artefacts["model"]), reference, corpus, settings,
                                          progress=progress)
            memo[key] = _point(run, metrics)
        points.append(memo[key])
    # Beside a point, what else its run differs in: not its seed (merged), budget or quick mode (the legend's).
    differ = differences(runs, ignore={"seed", "examples", "epochs", "max_steps", "top_layers", "batch_size"})
    return [{**p, "label": " · ".join(filter(None, [p["label"], differ.get(p["run_id"], "")]))} if p["run_id"] else p
            for p in points]


def _point(run: Run | None, metrics: dict) -> dict:
    """A plotted point: the scores, what its error bars need (core.evaluation.uncertainty.interval reads the point
    as it reads an evaluation result), and how it is labelled and grouped."""
    scores = {key: float(metrics[key]) for key in _SCORES}
    kept = {"n_queries": metrics.get("n_queries"), "uncertainty": metrics.get("uncertainty")}
    if run is None:
        return {"name": "reference model", "label": "reference", "run_id": None, "is_reference": True,
                "quick": False, "recipe": None, "margin": None, "budget": None, "seed": None, "group": None,
                **scores, **kept}
    quick = quick_text(run.config)
    config = resolved(run.config)
    return {"name": f"{run.id}{f' ({quick})' if quick else ''}", "label": point_label(run.config),
            "run_id": run.id, "is_reference": False, "quick": bool(quick), "recipe": run.config.get("recipe"),
            "margin": knob_value(run.config), "budget": budget_text(config), "seed": config.get("seed"),
            "group": json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True, default=str),
            **scores, **kept}


def point_label(config: dict) -> str:
    """The short label drawn beside a run's point: recipe and knob ('triplet m0.1', 'mgh s20'), and '(top-2 quick)'
    or '(quick)' for a quick point."""
    recipe = str(config.get("recipe") or "run")
    name, value = knob_name(recipe), knob_value(config)
    quick = quick_text(config)
    return " ".join(part for part in (recipe, f"{name[0]}{value:g}" if name and value is not None else "",
                                      f"({quick})" if quick else "") if part)


def budget_text(config: dict) -> str:
    """A run's training budget as the legend names it ('2,000 examples × 1 epoch', '… · ≤ 100 steps'): runs with
    different budgets are told apart on the plot."""
    examples, epochs, steps = config.get("examples"), config.get("epochs"), config.get("max_steps")
    text = f"{examples:,} examples × {epochs:g} epoch{'' if epochs == 1 else 's'}" if examples and epochs else (
        "budget not recorded")
    return f"{text} · ≤ {steps:,} steps" if steps else text


def seed_groups(points: list[dict]) -> list[dict]:
    """The points with every set of runs that differ only in their seed merged into one: the mean of their scores,
    with the seeds' min–max under "seed_range" and their standard deviation under "seed_sd" (n - 1), in the order
    of each set's first run. A run alone keeps its own point (and its per-target error bars)."""
    members: dict[object, list[dict]] = {}
    for i, p in enumerate(points):
        members.setdefault(p.get("group") or i, []).append(p)
    return [group[0] if len(group) == 1 else _merged(group) for group in members.values()]


def approximate_ci(points: list[dict]) -> list[str]:
    """The runs among the points whose 95% CI is the normal approximation (evaluated before the bootstrap interval
    was kept, core.evaluation.uncertainty.interval), so the page can say so; a mean of seeds has its own bars."""
    return [p["run_id"] for p in points if p.get("run_id") and interval(p, "polarity", "ci").approximate]


def _merged(group: list[dict]) -> dict:
    first = group[0]
    merged = {**first, "run_id": None, "run_ids": [p["run_id"] for p in group],
              "seeds": [p.get("seed") for p in group], "n_seeds": len(group), "uncertainty": None,
              "name": f"{len(group)} runs: {', '.join(p['run_id'] for p in group)}",
              "label": f"{first['label']} · {len(group)} seeds", "seed_range": {}, "seed_sd": {}}
    for metric in ("polarity", "similarity"):
        values = np.array([p[metric] for p in group], dtype=np.float64)
        merged[metric] = float(values.mean())
        merged["seed_range"][metric] = (float(values.min()), float(values.max()))
        merged["seed_sd"][metric] = float(values.std(ddof=1))
    return merged


# --- a metric before -> after per run ----------------------------------------------------------------------


def metric_changes(store: RunStore, key: str, corpus: str | None = None) -> list[dict]:
    """Metric `key` before and after training of every finished train run that reports both (on the corpus whose
    fingerprint is `corpus`, when given), with each one's 95% interval (None where it holds none), oldest first;
    empty when none does. Not every run reports every metric: STS Spearman comes from a run on scored pairs (or
    given an STS corpus), ordering accuracy and Kendall tau from a list recipe's run."""
    rows, runs = [], []
    for run in store.list(kind="train", with_losses=False)[::-1]:
        before = (run.before or {}).get(key)
        after = (run.metrics_after or {}).get(key)
        if run.status == "done" and before is not None and after is not None:
            runs.append(run)
            rows.append({"run_id": run.id, "recipe": run.config.get("recipe"),
                         "before": float(before), "after": float(after), "change": float(after) - float(before),
                         "before_ci": figure_interval(run.before, key),
                         "after_ci": figure_interval(run.metrics_after, key),
                         "paired": change_texts(run.before, run.metrics_after).get(key),
                         "corpus": ((run.progress.get("summary") or {}).get("corpus") or {}).get("fingerprint"),
                         "keys": corpus_keys((run.progress.get("summary") or {}).get("corpus") or {})})
    if corpus is not None:
        keep = {row["run_id"] for row in rows if row["corpus"] == corpus}
        rows, runs = [row for row in rows if row["run_id"] in keep], [run for run in runs if run.id in keep]
    labels = run_labels(runs)  # two runs that differ only in their teacher are named apart
    names = corpus_names(runs)  # the corpus each section of rows belongs to, as the Runs page names it
    paths = {run.id: corpus_path(run) for run in runs}
    return [{**row, "name": labels[row["run_id"]], "corpus_name": names.get(paths[row["run_id"]] or "", "?")}
            for row in rows]


def published_for(rows: list[dict], key: str) -> list[Published]:
    """The published figures of metric `key` (core.evaluation.published) stored for the corpora of metric_changes
    rows: one per corpus that has one, in the order of the rows."""
    corpora = dict.fromkeys(r["keys"] for r in rows if r.get("corpus"))
    return [figure for keys in corpora if (figure := published(keys).get(key)) is not None]


def change_table(store: RunStore, keys: tuple[str, ...], corpus: str | None = None) -> list[dict]:
    """One row per finished train run (on the corpus `corpus` names, when given) that reports any of the headline
    metrics `keys` before and after training: run, recipe and, per metric, "before → after (change)" with the
    metric's own unit and digits; oldest first."""
    rows: dict[str, dict] = {}
    for metric in (m for m in HEADLINE if m.key in keys):
        for r in metric_changes(store, metric.key, corpus):
            row = rows.setdefault(r["run_id"], {"run": r["name"], "recipe": r["recipe"]})
            row[metric.short] = (f"{metric.text(r['before'])} → {metric.text(r['after'])} "
                                 f"({r['paired'] or metric.change_text(r['before'], r['after'])})")
    return list(rows.values())


# --- margin constraint share -----------------------------------------------------------------------------

# (reference, corpus fingerprint, settings) -> reference embeddings of the mined (anchor, positive, negative).
# Keyed weakly by the model object: the slider calls this on every move, and even the model fingerprint
# (a pass over the weights) is too slow for that; a model dropped from the app's cache drops its entries.
_TRIPLETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def mined_triplet_embeddings(reference, corpus: Corpus, settings: MiningSettings = MiningSettings()
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference embeddings of the triplets a triplet run with these settings trains on (the defaults are a
    default Train-page run's: k 5, threshold 0.5, 2000 examples, seed 0).

    Mines exactly as a triplet run's examples are built (core.training.examples) (same rows, same cache), and reads the embeddings
    from the encoding mining already cached: every triplet text is one of the mined rows.
    """
    per_model = _TRIPLETS.setdefault(reference, {})
    key = (corpus.fingerprint, settings)
    if key not in per_model:
        texts = eval_sets(corpus, EvalSettings()).train_texts
        examples = mine_train_sample(reference, corpus, "triplet", settings)
        embeddings = encode_cached(reference, texts)
        row_of = {text: i for i, text in enumerate(texts)}
        per_model[key] = tuple(embeddings[[row_of[t] for t in examples.frame[col]]]
                               for col in ("anchor", "positive", "negative"))
    return per_model[key]


def mined_triplet_counts(reference, corpus: Corpus, settings: MiningSettings = MiningSettings()) -> tuple[int, int]:
    """(available, used): every distinct triplet mining finds (the Train page's "Available") and how many of them a
    run with these settings trains on (its "Used (N)", `settings.max_examples` drawn with its seed). Read from the
    mining cache mined_triplet_embeddings filled."""
    stats = mine_train_sample(reference, corpus, "triplet", settings).stats
    return int(stats["available"]), int(stats["examples"])


def triplet_count_note(available: int, used: int) -> str:
    """Why the margin slider counts `used` triplets when the Train page's preview found `available`: the slider
    shows the triplets a default triplet run trains on, a seeded draw of its Examples (N) from all that mining
    finds."""
    default_n = GENERAL_PARAMS["examples"].default
    quick = min(QUICK_BUDGET["examples"], used)
    if available > used:
        return (f"Why {used:,}: these are the triplets a Train-page triplet run with the default settings trains on. "
                f"Mining finds {available:,} (the Train page's \"Available\"); a run keeps its Examples (N) of them, "
                f"{default_n:,} by default, drawn with its seed (default 0). The quick model below trains on {quick:,} "
                "of them.")
    return (f"Why {used:,}: that is every triplet mining finds (the Train page's \"Available\"), no more than the "
            f"{default_n:,} examples a default run asks for, so a run trains on all of them; the quick model below on "
            f"{quick:,}.")


def margin_constraint_share(reference, corpus: Corpus, margins: list[float], distance: str = "cosine",
                            settings: MiningSettings = MiningSettings()) -> list[tuple[float, float]]:
    """(margin, share of mined triplets whose constraint d(a,p) + margin > d(a,n) is active) per margin.

    Active triplets are the ones that still push the model during training, so this shows what a margin will
    do before any training (docs/definitions.md, Example mining). The first call mines and encodes (cached on disk); later calls for
    the same reference and corpus only compare cached vectors.
    """
    ref_a, ref_p, ref_n = mined_triplet_embeddings(reference, corpus, settings)
    return [(float(m), active_share(ref_a, ref_p, ref_n, float(m), distance)) for m in margins]


def margin_share_figure(shares: list[tuple[float, float]], current: float) -> go.Figure:
    """Share of active triplets vs margin, margins evenly spaced (they span 0 to 10), the current one marked."""
    labels = [f"{m:g}" for m, _ in shares]
    values = [100 * s for _, s in shares]
    fig = go.Figure(go.Scatter(x=labels, y=values, mode="lines+markers", name="active share",
                               hovertemplate="margin %{x}: %{y:.1f}% active<extra></extra>"))
    if f"{current:g}" in labels:
        at = labels.index(f"{current:g}")
        fig.add_trace(go.Scatter(x=[labels[at]], y=[values[at]], mode="markers", name="current margin",
                                 marker={"size": 14, "color": "crimson", "symbol": "diamond"},
                                 hovertemplate="margin %{x}: %{y:.1f}% active<extra></extra>"))
    fig.update_layout(height=260, margin={"l": 10, "r": 10, "t": 10, "b": 10}, showlegend=False)
    fig.update_xaxes(title_text="margin", type="category")
    fig.update_yaxes(title_text="active triplets (%)", range=[0, 105])
    return fig
