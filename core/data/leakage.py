"""Train/target leakage of pair and list corpora, counted once here for both (core.data.corpus counts a labelled
corpus's, where an item is one text).

Two figures, from the strict to the soft:
- leaked: a target item that repeats a training item (a pair: the same two texts in either order; a list: the same
  anchor and the same members in any order). A model can score it by memory; `drop_leaked` drops these.
- shared: a target item with a text that also occurs in a training item (a pair: either text anywhere in the
  training pairs; a list: its anchor anywhere in the training lists), the leaked ones included. A model may score
  it partly by memory; nothing drops these, since on an STS corpus that could empty the target split.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.data.table import LEAK_EXAMPLES, leak_text
from core.errors import UserError


@dataclass(frozen=True)
class LeakTerms:
    """How one corpus kind words its leakage."""

    unit: str  # "pair": what a target item is
    same: str  # what makes two items the same, "the same two texts in either order"
    part: str  # what a shared item shares, "a text"


PAIR_TERMS = LeakTerms("pair", "the same two texts in either order", "a text")
LIST_TERMS = LeakTerms("list", "the same anchor and members in any order", "an anchor")


@dataclass(frozen=True)
class Leaks:
    """Boolean masks over the target items: `leaked` (repeats a training item), `shared` (has a text in a training
    item; True wherever `leaked` is); `shared_examples`: the first few distinct texts that the items only sharing a
    text (not repeating an item) share."""

    leaked: np.ndarray
    shared: np.ndarray
    shared_examples: list[str]


def find_leaks(train: Sequence[Sequence[str]], target: Sequence[Sequence[str]],
               key: Callable[[Sequence[str]], Hashable], texts: Callable[[Sequence[str]], Sequence[str]]) -> Leaks:
    """Each item is a sequence of texts, compared as leak_text gives them (case, spacing, accents ignored);
    `key(item)` is equal for two items that are the same, `texts(item)` the texts of a target item looked for among
    every text of the training items. The examples are the target's texts as written."""
    train = [[leak_text(t) for t in item] for item in train]
    compared = [[leak_text(t) for t in item] for item in target]
    train_keys = {key(item) for item in train}
    train_texts = {text for item in train for text in item}
    leaked = np.fromiter((key(item) in train_keys for item in compared), dtype=bool, count=len(target))
    shared = np.fromiter((any(t in train_texts for t in texts(item)) for item in compared), dtype=bool,
                         count=len(target)) | leaked
    examples: list[str] = []
    for i in np.flatnonzero(shared & ~leaked):
        if len(examples) >= LEAK_EXAMPLES:
            break
        examples += [t for t, c in zip(texts(target[i]), texts(compared[i])) if c in train_texts and t not in examples]
    return Leaks(leaked=leaked, shared=shared, shared_examples=examples[:LEAK_EXAMPLES])


def drop_leaked_rows(target: np.ndarray, leaks: Leaks, target_split: str, terms: LeakTerms) -> np.ndarray:
    """`target` without its leaked rows; refused when none would be left to evaluate on."""
    if len(target) and leaks.leaked.all():
        which = (f"The one {target_split} {terms.unit} is" if len(target) == 1
                 else f"Every one of the {len(target):,} {target_split} {terms.unit}s is")
        raise UserError(f"{which} also a training {terms.unit}, {terms.same}, so dropping "
                        f"{'it' if len(target) == 1 else 'them'} would leave nothing to evaluate on; keep "
                        f"{'it' if len(target) == 1 else 'them'} or fix the split.")
    return target[~leaks.leaked]


def leaked_words(n: int, target_split: str, terms: LeakTerms) -> str:
    """"3 test pairs are also training pairs, the same two texts in either order"."""
    if n == 0:
        return f"No {target_split} {terms.unit} is also a training {terms.unit}, {terms.same}"
    lead = (f"1 {target_split} {terms.unit} is also a training {terms.unit}" if n == 1 else
            f"{n:,} {target_split} {terms.unit}s are also training {terms.unit}s")
    return f"{lead}, {terms.same}"


def shared_words(shared: int, leaked: int, targets: int, target_split: str, terms: LeakTerms) -> str:
    """"40 of the 100 test pairs (40%) have a text that also occurs in a training pair": the `shared` of `targets`
    items (the `leaked` ones among them); "" when every shared item is also a repeat, which leaked_words says."""
    if shared <= leaked:
        return ""
    share = shared / targets if targets else 0.0
    percent = "<1%" if 0 < share < 0.005 else f"{share:.0%}"
    return (f"{shared:,} of the {targets:,} {target_split} {terms.unit}s ({percent}) "
            f"{'has' if shared == 1 else 'have'} {terms.part} that also occurs in a training {terms.unit}")


class LeakWords:
    """A pair or list corpus's leakage in words every front end shows, from its report's counts; the corpus names its
    items with TERMS."""

    TERMS: ClassVar[LeakTerms]

    def leakage(self) -> str:
        """"3 test pairs are also training pairs, the same two texts in either order": the exact repeats, which a
        model can score by memory and drop_leaked drops."""
        return leaked_words(self.report.leaked, self.target_split, self.TERMS)

    def sharing(self) -> str:
        """"40 of the 100 test pairs (40%) have a text that also occurs in a training pair": the softer figure, the
        exact repeats included, which nothing drops; "" when no item shares a text without being a repeat."""
        report = self.report  # the targets as read, the dropped repeats included
        return shared_words(report.shared, report.leaked, len(self.test) + report.leaked_dropped, self.target_split,
                            self.TERMS)
