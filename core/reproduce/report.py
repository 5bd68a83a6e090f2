"""How a reproduction reads: the CLI's help listing every experiment's files, and its rows as a text table (the
Reproductions page shows the same rows as a table of its own)."""

from __future__ import annotations

from core.reproduce import EXPERIMENTS


def help_text() -> str:
    """Each experiment's claim and the files it reads from --data."""
    lines = ["Experiments (NAME) and the files each reads from --data DIR:"]
    for e in EXPERIMENTS.values():
        lines.append(f"  {e.name:<8} {e.paper}")
        lines += [f"           {s.file}: {s.described}" for s in e.sources]
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def published_text(row: dict) -> str:
    """The paper's figure, or what stands in for one where the paper gives a trend, not a number."""
    return "no figure" if row["published"] is None else _number(row["published"])


def ours_text(row: dict) -> str:
    """Our figure with its 95% interval, e.g. '63.64 [62.70, 64.57]'."""
    if row["ours"] is None:
        return "-"
    ci = f" [{_number(row['ci_low'])}, {_number(row['ci_high'])}]" if row["ci_low"] is not None else ""
    return _number(row["ours"]) + ci


def table_text(rows: list[dict]) -> str:
    """Claim | published | ours [95% CI] | what differs from the paper, one line per row."""
    header = ("claim", "published", "ours [95% CI]", "differs from the paper")
    cells = [header] + [(r["claim"], published_text(r), ours_text(r), r["differs"] or "-") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    return "\n".join("  ".join(c[i].ljust(widths[i]) for i in range(3)) + "  " + c[3] for c in cells)
