"""The commands over recorded runs: runs, export."""

from __future__ import annotations

from core.evaluation.headline import HEADLINE
from core.runs.labels import knob_name, knob_value, shown_text
from core.runs.store import RunStore


def cmd_runs(args) -> dict:
    """Every run, those whose process is gone marked failed first (as the Runs page does), with its recipe's knob by
    its own name (margin, scale, w, rank margin I) and value."""
    store = RunStore()
    store.reap_orphans()
    return {"runs": [
        {"run_id": r.id, "kind": r.kind, "status": r.status, "recipe": r.config.get("recipe"),
         "knob": knob_name(str(r.config.get("recipe", ""))), "knob_value": knob_value(r.config),
         "settings": shown_text(r), "sweep_id": r.sweep_id, "after": r.metrics_after, "error": r.error,
         "damaged": r.damaged}
        for r in store.list(with_losses=False)]}


def cmd_export(args) -> dict:
    from core.runs.export import export_run

    return export_run(RunStore(), args.run_id, args.out, embeddings=not args.no_embeddings)


def headline_text(metrics: dict) -> str:
    """The headline figures a result holds (P and S, STS Spearman, ordering), as the pages show them."""
    return "  ".join(f"{m.short.format(k=metrics.get('k', 16))} {m.text(metrics[m.key])}" for m in HEADLINE
                     if m.key in ("polarity", "similarity", "sts_spearman", "ordering_accuracy", "kendall_tau")
                     and isinstance(metrics.get(m.key), (int, float)))


def print_runs(r: dict) -> None:
    for c in r["runs"]:
        scores = headline_text(c.get("after") or {})
        knob = "" if c.get("knob_value") is None else f"{c['knob']} {c['knob_value']}"
        print(f"{c['run_id']}  {c['kind']:<6} {c['status']:<9} {c.get('recipe') or '':<18} {knob:<14} {scores}"
              + (f"  {c['settings']}" if c.get("settings") else "")
              + (f"  [{c['error']}]" if c.get("damaged") else ""))


def print_export(r: dict) -> None:
    print(f"exported to {r['dir']}: " + ", ".join(r["files"]))
