"""The parameter schema: one description per setting (type, default, bounds, choices, presets, label, help) from
which the CLI flags, the Train page's widgets, config validation and the model card are all derived."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from core.errors import UserError, shorten

_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")
# Control characters, line and paragraph breaks and lone surrogates: no path, name or choice holds one, and one
# quoted back in an error message would split or garble its single line.
_UNPRINTABLE = ("Cc", "Cs", "Zl", "Zp")


@dataclass(frozen=True)
class Param:
    """One setting. Bounds are inclusive unless `low_open` / `high_open`; `optional` allows None (meaning
    "not set": the code then uses what `help` describes)."""

    name: str
    type: type  # int, float, str or bool
    default: object
    label: str
    help: str = ""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    presets: tuple = ()  # suggested values (the knob's preset box); any valid value is accepted
    optional: bool = False
    step: float | None = None  # the page's number_input step
    file: bool = False  # a path to a table (the page offers an upload)
    widget: dict = field(default_factory=dict)  # extra page-only arguments, e.g. {"format": "%.1e"}
    check: Callable[[str], str] | None = None  # a text setting's own rule: the value normalised, or a UserError

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def phrase(self) -> str:
        """The label inside a sentence or a run label: only a capitalised first word is lowered, so symbols and
        names keep their case ('rank margin I', 'weight of L_rank', 'ListMLE ...')."""
        first, space, rest = self.label.partition(" ")
        return (first.lower() if first[1:].islower() else first) + space + rest

    def _range(self) -> str:
        low, high = (None if b is None else str(int(b)) if float(b).is_integer() else f"{b:g}"
                     for b in (self.low, self.high))
        if low is not None and high is not None:
            return f" in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if low is not None:
            return f" {'>' if self.low_open else '>='} {low}"
        if high is not None:
            return f" {'<' if self.high_open else '<='} {high}"
        return ""

    def _fail(self, value: object) -> UserError:
        shown = shorten(value)
        if self.choices:
            return UserError(f"{self.name} must be one of {', '.join(map(str, self.choices))}, got {shown}")
        what = {int: "a whole number", float: "a finite number", bool: "true or false", str: "text"}[self.type]
        return UserError(f"{self.name} must be {what}{self._range()}, got {shown}")

    def parse(self, value: object) -> object:
        """The value as this setting's type, or a one-line UserError naming the setting. Strings (CLI flags, text
        boxes) are converted; bools are not numbers; NaN and infinities are refused."""
        if value is None and self.optional:
            return None
        if self.type is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in (*_TRUE, *_FALSE):
                return value.strip().lower() in _TRUE
            raise self._fail(value)
        if self.type is str:
            if value == "" and self.optional:  # an emptied text box: not set
                return None
            if isinstance(value, str) and not value.strip() and not self.choices:  # text that says nothing
                default = f" ({self.default})" if self.default is not None else ""
                raise UserError(f"{self.name} is empty; give a value, or leave the setting out for its "
                                f"default{default}")
            if not isinstance(value, str) or not value.strip() or (self.choices and value not in self.choices):
                raise self._fail(value)
            if any(unicodedata.category(c) in _UNPRINTABLE for c in value):
                raise UserError(f"{self.name} must be text without line breaks or control characters, got "
                                f"{shorten(value)}")
            return self.check(value) if self.check else value
        number = self._number(value)
        if (self.low is not None and (number < self.low or (self.low_open and number == self.low))) or (
                self.high is not None and (number > self.high or (self.high_open and number == self.high))):
            raise self._fail(value)
        return number

    def _number(self, value: object) -> int | float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise self._fail(value)
        if self.type is int and isinstance(value, int):
            return value  # exact: a float would round integers past 2**53
        try:
            number = float(value)
        except (ValueError, OverflowError):  # OverflowError: an int too large for a float
            raise self._fail(value) from None
        if not math.isfinite(number) or (self.type is int and not number.is_integer()):
            raise self._fail(value)
        return int(number) if self.type is int else number

    def parse_list(self, text: str | Sequence) -> list:
        """Comma-separated values (or a list), each parsed; at least one."""
        items = [v.strip() for v in text.split(",")] if isinstance(text, str) else list(text)
        values = [self.parse(v) for v in items if v != ""]
        if not values:
            raise UserError(f"Give at least one {self.name} value, separated by commas.")
        return values
