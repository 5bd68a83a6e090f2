"""Published figures: a reference number from elsewhere ("published: 77.6 on this test set") kept with a corpus and
drawn beside ours (the CLI's `published` and `evaluate`, the Corpus page, a run's metric cards, the Trade-off page).

One JSON file in the home (core.storage.corpora_dir() / "published.json") holds them for every corpus, keyed by its
content fingerprint (Corpus, PairCorpus and ListCorpus .fingerprint), then by headline metric key
(core.evaluation.headline.HEADLINE): {"version": 1, "corpora": {fingerprint: {key: {"value": v, "note": "..."}}}}.
A P@k or S@k entry also holds the "k" and "discount" it was measured at, where they were given (entries without them,
as every one stored before they were kept, read as not recorded). A value is stored in the metric's stored unit (an
accuracy as a share in [0, 1]) and given and shown in the shown one (85.0 for 85 %), as every card shows it. A file
that cannot be read is reported and read as empty, never a traceback; a write replaces it atomically, keeping an
unreadable one beside it as published.json.bad (.bad.1, .bad.2, ... after it), and writes back the entries it read
but did not understand (a figure of a later version).

A P@k / S@k measured at another k or rank discount than ours is another figure: `beside` is the one rule for when a
published one may stand beside ours as it is, and says the caveat that must go with it where it may not.

Here rather than in core.data: a figure is one of the headline metrics, which live in core.evaluation, and data may
not import evaluation (docs/architecture.md).
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.data.kinds import KINDS, kind_of
from core.errors import UserError, os_error, shorten
from core.evaluation.headline import DISCOUNTS, HEADLINE, Metric
from core.storage import corpora_dir, write_atomic

_log = logging.getLogger("contrastlab.published")

VERSION = 1
NOTE_CHARS = 200
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")  # reorder the text around them
METRICS = {m.key: m for m in HEADLINE}
# Each metric's range in its SHOWN unit: P@k / S@k and accuracies 0-100, STS Spearman x100 -100-100, Kendall tau.
UNITS = ("shown", "fraction")  # how a published value is given: as the cards show it, or as a fraction of 1
RANGES = {"polarity": (0.0, 100.0), "similarity": (0.0, 100.0), "knn_accuracy": (0.0, 100.0),
          "linear_accuracy": (0.0, 100.0), "sts_spearman": (-100.0, 100.0), "ordering_accuracy": (0.0, 100.0),
          "kendall_tau": (-1.0, 1.0)}
AT_K = tuple(m.key for m in HEADLINE if "{k}" in m.short)  # P@k, S@k: measured at a depth k with a rank discount
K_MAX = 1000  # the deepest k a published figure may name: as deep as a run's eval_k goes (core.training.config)
DISCOUNT_WORDS = {"linear": "linear discount", "none": "uniform weights"}  # DISCOUNTS as labels say them

Warn = Callable[[str], None]


@dataclass(frozen=True)
class Published:
    """One published figure of a corpus: `value` in the metric's stored unit, `note` where it comes from; for a
    P@k or S@k, the `k` and rank `discount` (DISCOUNTS) it was measured at, None where they were not recorded."""

    key: str
    value: float
    note: str = ""
    k: int | None = None
    discount: str | None = None

    @property
    def metric(self) -> Metric:
        return METRICS[self.key]

    @property
    def shown(self) -> float:
        """The value in the shown unit (77.6, 85.0 for 85 %), as it was given."""
        return round(self.metric.shown(self.value), 10)

    def text(self) -> str:
        """The value as cards show it: "77.6", "85.0%"."""
        return self.metric.text(self.value)

    @property
    def name(self) -> str:
        """"P@16" at its recorded k, "P@k" where none is, "STS Spearman"."""
        return self.metric.short.format(k="k" if self.k is None else self.k)

    def label(self, measured: bool = True) -> str:
        """"P@16 63.0 (uniform weights; Seed 000)", "STS Spearman 77.6 (Reimers 2019)": name, value, how it was
        measured (a P@k or S@k's discount, or what of it was not recorded) and source, one line; `measured` False
        leaves out how, for a line that says it in a caveat (shown_beside)."""
        parts = [_measured_words(self) if measured else "", self.note]
        words = "; ".join(part for part in parts if part)
        return f"{self.name} {self.text()}" + (f" ({words})" if words else "")


def _measured_words(figure: Published) -> str:
    if figure.key not in AT_K:
        return ""
    if figure.k is None and figure.discount is None:
        return "k and discount not recorded"
    if figure.discount is None:
        return "discount not recorded"
    return DISCOUNT_WORDS[figure.discount] + (", k not recorded" if figure.k is None else "")


def beside(figure: Published, k: int | None, discount: str | None) -> str | None:
    """The one rule for showing a published figure beside one of ours computed at depth `k` with rank `discount`
    (an evaluation result's "k" and "discount"): None where it can stand there as it is (a figure without a k, or a
    P@k / S@k measured at the same k and discount), else the caveat that must go with it, "measured at k = 16 with
    uniform weights, ours at k = 5 with linear discount" or "its k and discount were not recorded". Why: a P@16
    beside our P@5 reads as a gap between the models that may be only a gap between the settings."""
    if figure.key not in AT_K or (figure.k is not None and figure.discount is not None
                                  and (figure.k, figure.discount) == (k, discount)):
        return None
    if figure.k is None and figure.discount is None:
        return "its k and discount were not recorded"
    return f"measured at {_setting(figure.k, figure.discount)}, ours at {_setting(k, discount)}"


def shown_beside(figure: Published, k: int | None, discount: str | None) -> str:
    """The figure as a line beside ours names it: its label and, where `beside` gives one, the caveat,
    "P@16 63.0 (Seed 000) — measured at k = 16 with uniform weights, ours at k = 5 with linear discount"."""
    caveat = beside(figure, k, discount)
    return figure.label(measured=False) + (f" — {caveat}" if caveat else "")


def _setting(k: int | None, discount: str | None) -> str:
    depth = "an unrecorded k" if k is None else f"k = {k}"
    return f"{depth} with {'an unrecorded discount' if discount is None else DISCOUNT_WORDS.get(discount, discount)}"


def published_file() -> Path:
    return corpora_dir() / "published.json"


Keys = str | tuple[str | None, ...]  # a corpus's key, or its keys in order: its content key, then its fingerprint


def corpus_keys(corpus_or_summary) -> tuple[str | None, ...]:
    """The keys figures are kept under for a corpus (or its summary, as a run stores it): its content key, the same
    for the same rows in any order, then its fingerprint, under which figures were kept before there was one (and
    the only key of a summary stored before)."""
    get = corpus_or_summary.get if isinstance(corpus_or_summary, dict) else lambda name: getattr(
        corpus_or_summary, name, None)
    return get("content_key"), get("fingerprint")


def _keys(corpus: Keys) -> list[str]:
    return [corpus] if isinstance(corpus, str) else [key for key in corpus if key]


def published(corpus: Keys, warn: Warn | None = None) -> dict[str, Published]:
    """The published figures stored for a corpus (its key, or corpus_keys: the first that holds any), metric key ->
    Published, in HEADLINE order; empty when there are none. An unreadable file is reported through `warn`
    (default: a logged warning) and read as empty."""
    stored = _read(warn)
    figures = next((stored[key] for key in _keys(corpus) if stored.get(key)), {})
    return {key: figures[key] for key in METRICS if key in figures}


def _moved(corpora: dict, keys: list[str]) -> str:
    """The first of `keys`, holding the figures an older key of the same corpus held (they move to it)."""
    primary = _checked_fingerprint(keys[0] if keys else None)
    for old in keys[1:]:
        if old in corpora and not corpora.get(primary):
            corpora[primary] = corpora.pop(old)
    return primary


def set_published(fingerprint: Keys, key: object, shown_value: object, note: object = "", kind: str | None = None,
                  warn: Warn | None = None, k: object = None, discount: object = None,
                  unit: object = None) -> Published:
    """Store a published figure for the corpus: `shown_value` in the SHOWN unit (77.6 for STS Spearman, 85.0 for
    an accuracy of 85 %); `kind` (a corpus kind) refuses a metric that kind does not report; `k` and `discount`:
    where a P@k or S@k was measured, as far as it is known (checked_setting); `unit` as checked_value takes it. A bad
    key, value, unit, note, k or discount raises a UserError in one line. Replaces the figure stored for that
    metric."""
    metric = checked_metric(key, kind)
    figure = Published(metric.key, _stored(metric, shown_value, unit), checked_note(note),
                       *checked_setting(metric.key, k, discount))
    corpora, kept = _read_all(warn, writing=True)
    fingerprint = _moved(corpora, _keys(fingerprint))
    corpora.setdefault(fingerprint, {})[metric.key] = figure
    kept.get(fingerprint, {}).pop(metric.key, None)  # an unusable entry for this metric is replaced by the new one
    _write(corpora, kept)
    return figure


def remove_published(fingerprint: Keys, key: object, warn: Warn | None = None) -> Published:
    """Remove a stored figure (UserError when the key is not a metric or nothing is stored for it); returns it."""
    metric = checked_metric(key)
    corpora, kept = _read_all(warn, writing=True)
    figures = corpora.get(_moved(corpora, _keys(fingerprint)), {})
    if metric.key not in figures:
        raise UserError(f"No published {metric.short.format(k='k')} is stored for this corpus, so there is nothing "
                        "to remove.")
    removed = figures.pop(metric.key)
    _write(corpora, kept)
    return removed


def figure_sets() -> dict[str, tuple[str, tuple[str, ...]]]:
    """The headline figures each corpus kind reports, the only ones a corpus of that kind can take: key -> (what
    reports them, "A pair corpus"; the metric keys), a kind's name or another key of its own ("unscored pairs")."""
    return {key: value for kind in KINDS.values() for key, value in kind.figure_sets.items()}


def figures_kind(corpus) -> str:
    """The key of figure_sets for the figures this corpus reports, as its kind tells it."""
    return kind_of(corpus).figures_key(corpus)


def checked_metric(key: object, kind: str | None = None) -> Metric:
    """The headline metric called `key`; `kind` (a corpus kind) also refuses one that kind does not report."""
    if not isinstance(key, str) or key.strip() not in METRICS:
        raise UserError(f"There is no figure called {shorten(key)}; use one of {', '.join(METRICS)}.")
    metric = METRICS[key.strip()]
    words, keys = figure_sets().get(kind, (None, None))
    if keys is not None and metric.key not in keys:
        reports = ", ".join(keys) or "no headline figure"
        raise UserError(f"{words} reports {reports}, not {metric.key}, so it takes no published "
                        f"{metric.short.format(k='k')}.")
    return metric


def ambiguous(key: str, value: float) -> bool:
    """Whether `value` for this metric may be a fraction given where the cards show x100 or %: 0.85 for a kNN
    accuracy of 85 %, 0.776 for an STS Spearman of 77.6. Such a value is taken only with its UNITS said."""
    return RANGES[key][1] == 100.0 and 0.0 < abs(value) <= 1.0


def checked_value(key: object, shown_value: object, unit: object = None) -> float:
    """The value in the shown unit, checked: a finite number in the metric's range (a string is read as one).
    `unit` (UNITS) says how it was given: "shown" as the cards show it, "fraction" in [−1, 1] for a figure the cards
    show x100 or in % (converted); None refuses a value that could be either (`ambiguous`)."""
    metric = checked_metric(key)
    name = metric.short.format(k="k")
    value = shown_value
    if isinstance(value, str):
        try:
            value = float(value.strip()) if value.strip() and "_" not in value else None  # float() reads 8_5 as 85
        except ValueError:
            value = None
        if value is None:
            raise UserError(f"The published {name} must be a number such as 77.6; got {shorten(shown_value)}.")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UserError(f"The published {name} must be a number such as 77.6; got {shorten(shown_value)}.")
    value = float(value) + 0.0  # -0.0 is 0.0: it would show as "-0.0"
    if not math.isfinite(value):
        raise UserError(f"The published {name} must be a finite number; got {shorten(shown_value)}.")
    if unit is not None and unit not in UNITS:
        raise UserError(f"The unit of a published figure is one of {', '.join(UNITS)}; got {shorten(unit)}.")
    low, high = RANGES[metric.key]
    scaled = "in %" if metric.percent else "x100"
    if unit == "fraction":
        if high != 100.0:
            raise UserError(f"The published {name} is shown as it is, not {scaled}: give it without a unit.")
        if not -1.0 <= value <= 1.0:
            raise UserError(f"A published {name} given as a fraction lies between -1 and 1; got {value:g}.")
        value = value * 100.0 + 0.0
    if not low <= value <= high:
        how = ("%, as the cards show it: 85.0 for 85 %" if metric.percent else
               "" if metric.key == "kendall_tau" else ", as the cards show it (x100)")
        raise UserError(f"The published {name} must lie between {low:g} and {high:g}{how}; got {value:g}.")
    if unit is None and ambiguous(metric.key, value):
        raise UserError(f"The published {name} {value:g} could be a fraction ({value * 100:g} as the cards show it, "
                        f"{scaled}) or {value:g} itself: give the unit, fraction or shown (--unit).")
    return value


def checked_setting(key: object, k: object, discount: object) -> tuple[int | None, str | None]:
    """(k, discount) a published figure was measured at, checked; None for either one not given. Only a P@k or S@k
    takes them: k a whole number from 1 to K_MAX (a string of digits is read as one), discount one of DISCOUNTS."""
    metric = checked_metric(key)
    if k is None and discount is None:
        return None, None
    name = metric.short.format(k="k")
    if metric.key not in AT_K:
        raise UserError(f"A published {name} has no k or rank discount: only "
                        f"{' and '.join(METRICS[at_k].short.format(k='k') for at_k in AT_K)} are measured at one.")
    depth = k
    if isinstance(depth, str):  # digits only (no "1_000", no "²"), and few: never int() of a 5,000-digit string
        text = depth.strip()
        depth = int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None
    if k is not None and (isinstance(depth, bool) or not isinstance(depth, numbers.Integral)
                          or not 1 <= depth <= K_MAX):
        raise UserError(f"The k of a published {name} must be a whole number from 1 to {K_MAX}, the depth it was "
                        f"measured at; got {shorten(k)}.")
    if discount is not None and (not isinstance(discount, str) or discount.strip() not in DISCOUNTS):
        raise UserError(f"The rank discount of a published {name} must be one of {', '.join(DISCOUNTS)}; got "
                        f"{shorten(discount)}.")
    return (None if k is None else int(depth)), (None if discount is None else discount.strip())


def checked_note(note: object) -> str:
    """A source note: at most NOTE_CHARS characters of one line, without control characters; None or "" for none."""
    if note is None:
        return ""
    if not isinstance(note, str):
        raise UserError(f"The source note must be text; got {shorten(note)}.")
    note = note.strip()
    if len(note) > NOTE_CHARS:
        raise UserError(f"The source note must be at most {NOTE_CHARS} characters; it has {len(note):,}.")
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in BIDI_CONTROLS for c in note):
        raise UserError(f"The source note must be one line without control characters (tab, line break, ...); got "
                        f"{shorten(note)}.")
    return note


def _stored(metric: Metric, shown_value: object, unit: object = None) -> float:
    value = checked_value(metric.key, shown_value, unit)
    return value / 100 if metric.percent else value


def _checked_fingerprint(fingerprint: object) -> str:
    if not isinstance(fingerprint, str) or not fingerprint:
        raise UserError(f"A corpus fingerprint is a non-empty string; got {shorten(fingerprint)}.")
    return fingerprint


# ---------------------------------------------------------------- the file


Raw = dict[str, dict[str, object]]  # fingerprint -> key -> an entry as the file holds it, not understood


def _read(warn: Warn | None) -> dict[str, dict[str, Published]]:
    """Every stored figure, fingerprint -> key -> Published (see _read_all)."""
    return _read_all(warn)[0]


def _read_all(warn: Warn | None, writing: bool = False) -> tuple[dict[str, dict[str, Published]], Raw]:
    """(every stored figure, fingerprint -> key -> Published; the entries that do not hold a valid figure, as the
    file holds them, reported and skipped here but written back by the next write, so a figure this version does
    not know is never lost). A file that cannot be read or parsed is reported and read as empty (when `writing`,
    moved aside to a numbered published.json.bad first, so the write keeps it)."""
    path = published_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, {}
    except (OSError, UnicodeDecodeError) as exc:
        return _unreadable(path, f"it could not be read ({type(exc).__name__})", warn, writing), {}
    try:
        data = json.loads(text)
        corpora = data["corpora"]
        if not isinstance(corpora, dict) or not all(isinstance(v, dict) for v in corpora.values()):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):
        return _unreadable(path, "it is not a published-figures file", warn, writing), {}
    found: dict[str, dict[str, Published]] = {}
    kept: Raw = {}
    skipped = []
    for fingerprint, figures in corpora.items():
        for key, entry in figures.items():
            try:
                metric = checked_metric(key)
                value = float(entry["value"])
                checked_value(key, metric.shown(value), "shown")
                found.setdefault(fingerprint, {})[key] = Published(
                    key, value, checked_note(entry.get("note", "")),
                    *checked_setting(key, entry.get("k"), entry.get("discount")))
            except (UserError, KeyError, TypeError, ValueError, AttributeError):
                skipped.append(shorten(key, 30))
                kept.setdefault(fingerprint, {})[key] = entry
    if skipped:
        _report(f"Skipped {len(skipped)} unusable published figure{'s' if len(skipped) > 1 else ''} in {path} "
                f"({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''}); kept in the file as they are.",
                warn)
    return found, kept


def _entry(figure: Published) -> dict:
    """A figure as the file holds it: k and discount only where recorded, so a figure without them is written as it
    was before they were kept."""
    measured = {"k": figure.k, "discount": figure.discount}
    return {"value": figure.value, "note": figure.note, **{name: v for name, v in measured.items() if v is not None}}


def _unreadable(path: Path, problem: str, warn: Warn | None, writing: bool) -> dict:
    if writing:
        bad = next(candidate for n in range(10**6) if not (candidate := path.with_name(
            path.name + ".bad" + (f".{n}" if n else ""))).exists())  # every earlier copy kept
        try:
            os.replace(path, bad)
        except OSError as exc:
            raise os_error(exc, path, "move aside the unreadable") from None
        _report(f"The published figures in {path} were unreadable ({problem}); kept it as {bad.name} and started a "
                "new file.", warn)
    else:
        _report(f"The published figures in {path} are unreadable ({problem}); showing none until it is fixed or "
                "a figure is saved (which keeps it as published.json.bad).", warn)
    return {}


def _report(message: str, warn: Warn | None) -> None:
    (warn or _log.warning)(message)


def _write(corpora: dict[str, dict[str, Published]], kept: Raw) -> None:
    """The figures, with the entries read but not understood (`kept`) where no figure replaced them."""
    fingerprints = sorted(set(corpora) | set(kept))
    data = {"version": VERSION, "corpora": {
        fingerprint: entries for fingerprint in fingerprints
        if (entries := {**kept.get(fingerprint, {}),
                        **{key: _entry(f) for key, f in corpora.get(fingerprint, {}).items()}})}}
    path = published_file()
    try:
        write_atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=1, allow_nan=False), encoding="utf-8"))
    except OSError as exc:
        raise os_error(exc, path, "write the published figures to") from None
