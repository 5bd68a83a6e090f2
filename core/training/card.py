"""The ContrastLab section of an exported model card: what a reader needs to judge and reproduce the run."""

from __future__ import annotations

from core.evaluation.headline import HEADLINE
from core.training.config import TrainConfig
from core.training.recipes import get_recipe


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if abs(value) <= 1 else f"{value:.1f}"


def _corpus_text(summary: dict) -> str:
    """What a corpus summary (core.data Corpus, PairCorpus or ListCorpus .summary()) holds, in a few words."""
    target = summary.get("target_split", "test")
    if summary.get("kind") == "lists":
        return f"{summary['lists_train']} train lists, {summary['lists_test']} {target} lists"
    rows = f"{summary.get('rows_train', '?')} train rows, {summary.get('rows_test', '?')} {target} rows"
    return rows if summary.get("kind") == "pairs" else f"{rows}, {summary.get('n_classes', '?')} classes"


def contrastlab_card_section(cfg: TrainConfig, result: dict) -> str:
    """Markdown appended to sentence-transformers' own card (which already covers loss and trainer args)."""
    recipe = get_recipe(cfg.recipe)
    corpus = result.get("corpus", {})
    before, after = result.get("before", {}), result.get("after", {})
    k = after.get("k", cfg.eval_k)
    settings = cfg.recipe_settings
    knob = recipe.knob_param
    lines = [
        "## ContrastLab fine-tuning",
        "",
        f"- **Base model:** `{cfg.model}`",
        f"- **Reference model (mining, S@k):** `{cfg.reference or cfg.model}`",
        f"- **Corpus:** `{cfg.corpus}` — {_corpus_text(corpus)}",
        f"- **Recipe:** {recipe.title} (`{cfg.recipe}`)"
        + (f", {knob.label.lower()} = {settings[knob.name]}" if knob else ""),
    ]
    if "lists" in result:
        lists = result["lists"]
        lines.append(f"- **Lists:** from the {lists['source']}: {_corpus_text(lists)}")
    others = [f"`{name}` = {value}" for name, value in settings.items() if knob is None or name != knob.name]
    if others:
        lines.append(f"- **Recipe settings:** {', '.join(others)}")
    lines += [
        f"- **Examples:** {result.get('examples', {}).get('examples', '?')} "
        f"({result.get('examples', {}).get('format', recipe.example_format)})",
        f"- **Training:** {cfg.epochs} epoch(s), batch {cfg.batch_size}, lr {cfg.lr}, warm-up ratio "
        f"{cfg.warmup_ratio}, seed {cfg.seed}, pooling {cfg.pooling}, frozen: "
        f"{'embeddings + ' if cfg.freeze_embeddings else ''}{cfg.freeze_layers} layer(s)",
        "",
        f"| metric (k = {k}) | before | after |",
        "|---|---|---|",
    ]
    for metric in HEADLINE:
        if metric.key in before or metric.key in after:
            lines.append(f"| {metric.long} | {_fmt(before.get(metric.key))} | {_fmt(after.get(metric.key))} |")
    lines += ["", "Load with `SentenceTransformer(path)`. Reproduce with `python -m core train --config "
              "contrastlab_config.json`.", ""]
    return "\n".join(lines)
