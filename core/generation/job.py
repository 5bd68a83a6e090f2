"""A generation as a background run (kind "generate", core.jobs.worker.JOBS): the Generate page queues one, a worker
process makes the items (progress in items with tokens/s and an ETA, the latest items as a preview), measures the
result's quality with the reference model, and keeps the file and its sidecar as the run's artefacts. A cancel
stops starting items; the finished ones stay in the item cache, so running it again continues where it stopped."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

from core.errors import Cancelled, UserError
from core.generation.engines import engine_for
from core.generation.lists import ListSettings
from core.generation.negatives import NegativeSettings
from core.generation.run import generate

PREVIEW_ITEMS = 5


def generation_config(kind: str, source: str, out_name: str, model: str, endpoint: str | None, settings: dict,
                      seed: int = 0, concurrency: int = 4, limit: int | None = None,
                      reference: str | None = None, check_against: dict | None = None) -> dict:
    """The run config the page queues, checked here (a bad setting is a UserError before any worker starts);
    `check_against`: the corpus the written texts are checked against for leakage (core.generation.run)."""
    if kind not in ("lists", "negatives"):
        raise UserError(f"A generation makes lists or negatives, got {kind!r}.")
    _settings(kind, settings)
    if Path(out_name).suffix.lower() not in (".csv", ".parquet") or Path(out_name).name != out_name:
        raise UserError(f"The output name must be a file name ending in .csv or .parquet, got {out_name!r}.")
    return {"kind": kind, "source": source, "out_name": out_name, "model": model, "endpoint": endpoint or None,
            "settings": settings, "seed": seed, "concurrency": concurrency, "limit": limit, "reference": reference,
            "check_against": check_against}


def _settings(kind: str, settings: dict) -> ListSettings | NegativeSettings:
    try:
        return ListSettings(**settings) if kind == "lists" else NegativeSettings(**settings)
    except TypeError as exc:
        raise UserError(f"Unknown generation settings: {exc}.") from exc


def preview(item) -> dict:
    """An item as the page previews it: a list's members, or a query with its negatives (or why it failed)."""
    if hasattr(item, "members"):
        return {"members": list(item.members), "ended": item.dropped}
    return {"query": item.query, "positive": item.positive, "negatives": list(item.negatives or []),
            "error": item.error}


def run_job(ctx) -> dict:
    """Make the items, write the file into the run's folder, measure its quality; see the module docstring."""
    config = ctx.config
    kind = config["kind"]
    settings = _settings(kind, config["settings"])
    ctx.progress(phase="loading the language model", step=None, total=None, unit=None, eta_s=None)
    engine = engine_for(config["model"], config.get("endpoint"))
    out = ctx.tmp_dir() / config["out_name"]
    latest: deque = deque(maxlen=PREVIEW_ITEMS)

    def progress(tally) -> None:
        _per_s, tokens_s, left = tally.rates(time.monotonic())
        ctx.progress(phase=f"generating {kind}", step=tally.done, total=tally.total, unit="items",
                     eta_s=None if left is None else round(left, 1), tokens_per_s=round(tokens_s, 1),
                     cached=tally.cached)

    def on_item(_index: int, item) -> None:
        latest.append(preview(item))
        ctx.progress(preview=list(latest))

    outcome = generate(kind, engine, Path(config["source"]), out, settings, seed=config.get("seed", 0),
                       concurrency=config.get("concurrency", 4), limit=config.get("limit"), progress=progress,
                       should_stop=ctx.should_stop, on_item=on_item, check_against=config.get("check_against"))
    if outcome.cancelled:
        raise Cancelled()
    ctx.progress(phase="measuring quality with the reference model", step=None, total=None, unit=None, eta_s=None)
    quality = measure(kind, out, config.get("reference"))
    ctx.commit_artefact("generated", out)
    ctx.commit_artefact("sidecar", outcome.sidecar)
    return {"kind": kind, "counts": outcome.counts, "generator": engine.describe(), "settings": settings.key(),
            "quality": quality, "seconds": round(outcome.seconds, 2)}


def measure(kind: str, path: Path, reference: str | None) -> dict:
    """The generated file's quality by the reference model (core.generation.quality): lists' cosine to the anchor by
    position, or the negatives' mean cosine to the query (seed 004's Table 4)."""
    from core.data.table import read_file
    from core.generation.quality import list_quality, negatives_quality, reference_embed
    from core.models.loading import load_model

    df = read_file(path)[0]
    embed = reference_embed(load_model(reference))
    if kind == "lists":
        lists = [group.sort_values("rank")["text"].tolist() for _id, group in df.groupby("list_id", sort=False)]
        return list_quality(lists, embed)
    negatives = [c for c in df.columns if str(c).startswith("negative_")]
    rows = [(r["query"], r["positive"], [r[c] for c in negatives]) for _i, r in df.iterrows()]
    return negatives_quality(rows, embed)
