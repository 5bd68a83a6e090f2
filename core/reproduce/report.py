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


def _number(value: float | None, signed: bool = False) -> str:
    return "-" if value is None else f"{value:+.2f}" if signed else f"{value:.2f}"


def published_text(row: dict) -> str:
    """The paper's figure with the setting it was measured in where that is not ours ("+1.04 (SynCSE-r, BERT-base,
    average of 7 STS tasks)"), or what stands in for one: an absolute figure of another setting is named in the
    notes, and a paper may give a trend, not a number."""
    if row["published"] is None:  # a paper's figure of another setting is in the notes; none at all: a trend
        return "not comparable (see notes)" if row.get("setting") else "no figure"
    value = _number(row["published"], signed=row.get("kind") == "difference")
    return value if row.get("comparable") or not row.get("setting") else f"{value} ({row['setting']})"


def ours_text(row: dict) -> str:
    """Our figure with its 95% interval, e.g. '63.64 [62.70, 64.57]'; a difference signed, with its paired
    p-value: '+0.49 [-0.10, +1.10], p = 0.110'."""
    from core.evaluation.headline import p_text

    if row["ours"] is None:
        return "-"
    signed = row.get("kind") == "difference"
    ci = (f" [{_number(row['ci_low'], signed)}, {_number(row['ci_high'], signed)}]" if row["ci_low"] is not None
          else "")
    p = f", {p_text(row['p_value'])}" if signed and row.get("p_value") is not None else ""
    return _number(row["ours"], signed) + ci + p


def table_text(rows: list[dict]) -> str:
    """Claim | published | ours [95% CI] | what differs from the paper, one line per row; a difference row's claim
    reads "A - B"."""
    header = ("claim", "published", "ours [95% CI]", "differs from the paper")
    cells = [header] + [(r["claim"], published_text(r), ours_text(r), r["differs"] or "-") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    return "\n".join("  ".join(c[i].ljust(widths[i]) for i in range(3)) + "  " + c[3] for c in cells)
