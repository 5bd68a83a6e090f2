"""The ContrastLab section of an exported model card: what a reader needs to judge and reproduce the run."""

from __future__ import annotations

METRICS = [
    ("polarity", "P@k (label agreement of retrieved texts)"),
    ("similarity", "S@k (reference-model similarity of retrieved texts)"),
    ("knn_accuracy", "kNN accuracy"),
    ("linear_accuracy", "Linear-probe accuracy"),
]


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if abs(value) <= 1 else f"{value:.1f}"


def contrastlab_card_section(cfg, result: dict) -> str:
    """Markdown appended to sentence-transformers' own card (which already covers loss and trainer args)."""
    from core.training.recipes import get_recipe

    recipe = get_recipe(cfg.recipe)
    margin = recipe.margin_or_default(cfg.margin)
    corpus = result.get("corpus", {})
    before, after = result.get("before", {}), result.get("after", {})
    k = after.get("k", cfg.eval_k)
    lines = [
        "## ContrastLab fine-tuning",
        "",
        f"- **Base model:** `{cfg.model}`",
        f"- **Reference model (mining, S@k):** `{cfg.reference or cfg.model}`",
        f"- **Corpus:** `{cfg.corpus}` — {corpus.get('rows_train', '?')} train rows, "
        f"{corpus.get('rows_test', '?')} {corpus.get('target_split', 'test')} rows, "
        f"{corpus.get('n_classes', '?')} classes",
        f"- **Recipe:** {recipe.title} (`{cfg.recipe}`)"
        + (f", {recipe.margin_name} = {margin}" if recipe.margin_name else ""),
        f"- **Examples:** {result.get('examples', {}).get('examples', '?')} "
        f"({result.get('examples', {}).get('format', recipe.example_format)})",
        f"- **Training:** {cfg.epochs} epoch(s), batch {cfg.batch_size}, lr {cfg.lr}, warm-up ratio "
        f"{cfg.warmup_ratio}, seed {cfg.seed}, pooling {cfg.pooling}, frozen: "
        f"{'embeddings + ' if cfg.freeze_embeddings else ''}{cfg.freeze_layers} layer(s)",
        "",
        f"| metric (k = {k}) | before | after |",
        "|---|---|---|",
    ]
    for key, title in METRICS:
        if key in before or key in after:
            lines.append(f"| {title} | {_fmt(before.get(key))} | {_fmt(after.get(key))} |")
    lines += ["", "Load with `SentenceTransformer(path)`. Reproduce with `python -m core train --config "
              "contrastlab_config.json`.", ""]
    return "\n".join(lines)
