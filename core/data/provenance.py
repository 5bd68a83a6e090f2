"""Where a training file came from: a file that `python -m core generate` wrote carries a sidecar,
`<file>.generation.json`, naming the generator, its settings, the source and the counts. A run trained on such a file
records that summary beside its examples, so the run, its export and its model card name the language model that
wrote the data; a file edited after it was written says so instead of vouching for text the model never wrote."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

SIDECAR_SUFFIX = ".generation.json"


def sidecar_path(out: Path) -> Path:
    """Where a generated file's record of how it was made lives: beside it, `<file>.generation.json`."""
    return out.with_name(out.name + SIDECAR_SUFFIX)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def generator_text(described: dict) -> str:
    """An engine's describe() in words, as the page, the CLI and a model card name a generation's source."""
    if described.get("engine") == "endpoint":
        return f"{described.get('model')} at {described.get('endpoint')}"
    return (f"local folder {described.get('model')} (content {described.get('fingerprint')}, "
            f"{described.get('device')}, {described.get('dtype')}; {described.get('template')})")


def generation_summary(path: str | Path) -> dict | None:
    """The sidecar of a training file in brief (JSON-ready), None where the file has none (a file a user made);
    a sidecar that cannot be read, or a file whose bytes changed since it was written, is said in `problem`."""
    path = Path(path)
    sidecar = sidecar_path(path)
    if not sidecar.is_file():
        return None
    try:
        record = json.loads(sidecar.read_text(encoding="utf-8"))
        settings, counts = record.get("settings") or {}, record.get("counts") or {}
        summary = {"file": path.name, "kind": str(record["kind"]), "generator": generator_text(record["generator"]),
                   "source": str(record.get("source")), "seed": record.get("seed"),
                   "items": counts.get("lists", counts.get("rows")), "source_items": counts.get("source_items"),
                   "cancelled": bool(record.get("cancelled"))}
        if leak := counts.get("leakage"):
            summary["leakage"] = {"corpus": str(leak["corpus"]), "leaked": int(leak["leaked"]), "of": int(leak["of"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return {"file": path.name, "problem": f"its sidecar {sidecar.name} cannot be read ({type(exc).__name__})"}
    if record["kind"] == "lists":
        summary |= {"method": settings.get("method"), "lam": settings.get("lam"), "steps": settings.get("steps")}
    written = record.get("sha256")
    if written and written != file_sha256(path):
        summary["problem"] = "the file was changed after it was generated"
    return summary


def generation_text(summary: dict) -> str:
    """A generation summary in one clause: "written by X from S (directional control, λ = 1.5, 32 steps; seed 0;
    120 lists of 128 sources)"."""
    if "generator" not in summary:
        return f"{summary['file']}: {summary['problem']}"
    how = []
    if summary["kind"] == "lists":
        method = {"directional": "directional control", "stepwise": "step by step (λ = 0)",
                  "single": "single step"}.get(str(summary.get("method")), str(summary.get("method")))
        how.append(method + (f", λ = {summary['lam']:g}" if summary.get("method") == "directional" else "")
                   + f", {summary.get('steps')} steps")
    how.append(f"seed {summary.get('seed')}")
    how.append(f"{summary.get('items')} {summary['kind'] if summary['kind'] == 'lists' else 'rows'} of "
               f"{summary.get('source_items')} sources" + (", cancelled part-way" if summary.get("cancelled") else ""))
    if leak := summary.get("leakage"):
        how.append(f"{leak['leaked']} of {leak['of']} texts are test texts of {leak['corpus']}")
    text = f"{summary['file']}, written by {summary['generator']} from {summary['source']} ({'; '.join(how)})"
    return text + (f"; {summary['problem']}" if summary.get("problem") else "")
