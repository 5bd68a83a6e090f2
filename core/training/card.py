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


def contrastlab_card_section(cfg: TrainConfig, result: dict, ata: bool | None = None) -> str:
    """Markdown appended to sentence-transformers' own card (which already covers loss and trainer args). `ata`: the
    saved model pools with ATA (default: the run chose ATA pooling; a base model that already pools with ATA and
    keeps its own pooling also needs the ATA loading line)."""
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
        + (f"all but the top {cfg.top_layers} layer(s), trained from the frozen part's cached output"
           if cfg.top_layers else f"{'embeddings + ' if cfg.freeze_embeddings else ''}{cfg.freeze_layers} layer(s)"),
        "",
        f"| metric (k = {k}) | before | after |",
        "|---|---|---|",
    ]
    for metric in HEADLINE:
        if metric.key in before or metric.key in after:
            lines.append(f"| {metric.long} | {_fmt(before.get(metric.key))} | {_fmt(after.get(metric.key))} |")
    lines += ["", f"{_load_text(cfg.pooling == 'ata' if ata is None else ata)} Reproduce with `python -m core train --config contrastlab_config.json`.", ""]
    return "\n".join(lines)


def _load_text(ata: bool) -> str:
    """How a reader loads the saved directory. An ATA-pooled model's modules.json names ContrastLab's module classes,
    which sentence-transformers imports only with trust_remote_code, and only if ContrastLab's `core` is importable
    (checked in tests/test_ata.py); ContrastLab's own loader needs neither the flag nor the directory's trust."""
    if not ata:
        return "Load with `SentenceTransformer(path)`."
    return ("Load with `from core.models.ata import load_allowing_ata; load_allowing_ata(path)` with ContrastLab's "
            "`core` package importable, no `trust_remote_code` needed: ATA pooling is ContrastLab code, which a plain "
            "`SentenceTransformer(path)` refuses and `SentenceTransformer(path, trust_remote_code=True)` loads only "
            "where `core` is importable too.")
