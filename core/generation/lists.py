"""Seed 003's ranked lists (docs/definitions.md, "Generated ranked lists"): from a source sentence x(0), each later
sentence drifts a step further in meaning, so the list's order is known without any embedding model. Three methods:
- directional: x(1) from the instruction and x(0); each later x(i) greedy on (1+λ)·log p(·|I, x(i−1)) −
  λ·log p(·|I, x(i−2)) (Eq. 4), which is transformers' classifier-free guidance with scale 1 + λ and the context
  two steps back as its negative prompt; it needs log-probabilities, so a local model;
- stepwise: the same with λ = 0 (each sentence from the previous one alone);
- single: the whole list from one few-shot prompt.
Every member passes a rule-based check before it joins (complete, not empty, not a repeat, of a length near the
source's); a list keeps its members up to the first that fails, and a list of fewer than MIN_MEMBERS is dropped."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from core.errors import UserError
from core.generation.engines import Engine, Messages

METHODS = ("directional", "stepwise", "single")
DEFAULT_LAMBDA = 1.5  # the paper's λ
DEFAULT_STEPS = 32  # sentences after the source: lists of 33
MAX_STEPS = 200
MIN_MEMBERS = 3  # a list shorter than this (the source and one sentence) orders nothing worth training on
LENGTH_RANGE = (0.5, 2.0)  # a member's words, as a multiple of the source's ("each of similar length")
MAX_SENTENCE_TOKENS = 96  # one sentence's answer; longer is cut, so incomplete
INSTRUCTION = ("Rewrite the sentence below into a new sentence that keeps most of its meaning but moves one small "
               "step away from it: change one detail, idea or word choice. Keep about the same length. Answer with "
               "the new sentence only.")
SINGLE_INSTRUCTION = ("Write a chain of {steps} sentences starting from the sentence below. Each sentence moves one "
                      "small step away in meaning from the one before it, so that the first is close to the given "
                      "sentence and the last is unrelated to it. Keep every sentence about as long as the given one. "
                      "Answer with the numbered sentences only, one per line.")
SINGLE_EXAMPLE = ("A boy is riding a bicycle down the street.",
                  ["A boy is riding a bicycle down the road.", "A girl is riding a bicycle down the road.",
                   "A girl is riding a horse down the road.", "A girl is feeding a horse in a field.",
                   "A farmer is feeding the cattle in a field.", "The market price of cattle fell this year."])
_NUMBERED = re.compile(r"^\s*(?:\d{1,3}[.):]|[-*•])\s*")
_LABEL = re.compile(r"^\s*(?:new sentence|sentence|answer)\s*:\s*", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
DROP_REASONS = ("incomplete", "empty", "repeat", "length")


@dataclass(frozen=True)
class ListSettings:
    """What changes a generated list: a cached list is reused only under the same settings (key())."""

    method: str = "directional"
    lam: float = DEFAULT_LAMBDA
    steps: int = DEFAULT_STEPS
    max_tokens: int = MAX_SENTENCE_TOKENS

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise UserError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}.")
        if not (isinstance(self.lam, int | float) and 0 <= self.lam <= 100):
            raise UserError(f"--lambda must be a number from 0 to 100 (the paper's is {DEFAULT_LAMBDA}), got "
                            f"{self.lam!r}.")
        if not (isinstance(self.steps, int) and 1 <= self.steps <= MAX_STEPS):
            raise UserError(f"--steps must be a whole number from 1 to {MAX_STEPS} (the paper's is {DEFAULT_STEPS}), "
                            f"got {self.steps!r}.")

    @property
    def scale(self) -> float:
        """The guidance scale of Eq. 4: 1 + λ (stepwise: 1, plain greedy)."""
        return 1.0 + (self.lam if self.method == "directional" else 0.0)

    def key(self) -> dict:
        lam = self.lam if self.method == "directional" else 0.0
        return {**asdict(self), "lam": float(lam), "instruction": INSTRUCTION if self.method != "single"
                else [SINGLE_INSTRUCTION, SINGLE_EXAMPLE]}


@dataclass(frozen=True)
class GeneratedList:
    """A source and the members that passed the check, in order (source first); `dropped`: why the chain ended
    early (one of DROP_REASONS), None when it reached its steps."""

    members: tuple[str, ...]
    tokens: int
    dropped: str | None

    @property
    def kept(self) -> bool:
        return len(self.members) >= MIN_MEMBERS

    def to_dict(self) -> dict:
        return {"members": list(self.members), "tokens": self.tokens, "dropped": self.dropped}

    @classmethod
    def from_dict(cls, data: dict) -> GeneratedList:
        members, tokens, dropped = data["members"], data["tokens"], data["dropped"]
        if not (isinstance(members, list) and all(isinstance(m, str) for m in members) and isinstance(tokens, int)
                and (dropped is None or dropped in DROP_REASONS)):
            raise ValueError("not a generated list")
        return cls(tuple(members), tokens, dropped)


def messages(sentence: str) -> Messages:
    """The step prompt: the instruction, then the sentence to move away from."""
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": f"Sentence: {sentence}"}]


def single_messages(source: str, steps: int) -> Messages:
    """The single-step baseline's few-shot prompt: one worked chain, then the source."""
    example, chain = SINGLE_EXAMPLE
    shown = "\n".join(f"{i}. {s}" for i, s in enumerate(chain, 1))
    return [{"role": "system", "content": SINGLE_INSTRUCTION.format(steps=steps)},
            {"role": "user", "content": f"Sentence: {example}"},
            {"role": "assistant", "content": shown},
            {"role": "user", "content": f"Sentence: {source}"}]


def clean_sentence(text: str) -> str:
    """An answer as one sentence: its first non-empty line, without a list marker, a 'Sentence:' label or quotes."""
    line = next((part for part in text.splitlines() if part.strip()), "")
    line = _LABEL.sub("", _NUMBERED.sub("", line)).strip()
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "\"'":
        line = line[1:-1].strip()
    return line


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def check_member(candidate: str, finished: bool, members: list[str]) -> str | None:
    """Why a candidate cannot join the list (a DROP_REASONS entry), None when it passes."""
    if not finished:
        return "incomplete"
    if not candidate:
        return "empty"
    if _norm(candidate) in {_norm(m) for m in members}:
        return "repeat"
    words, source = len(candidate.split()), max(len(members[0].split()), 1)
    low, high = LENGTH_RANGE
    if not (low * source <= words <= max(high * source, source + 2)):
        return "length"
    return None


def check_engine(engine: Engine, settings: ListSettings) -> None:
    """Refuse directional control on an engine without log-probabilities, before any source is read."""
    if settings.method == "directional" and not engine.guided:
        raise UserError("Directional control needs the model's log-probabilities, which a chat endpoint does not "
                        "give; use --model with a local model folder, or --method stepwise or single.")


def generate_list(engine: Engine, source: str, settings: ListSettings, seed: int = 0) -> GeneratedList:
    """One list from `source` by settings.method (see the module docstring)."""
    check_engine(engine, settings)
    members, tokens = [source], 0
    if settings.method == "single":
        reply = engine.chat(single_messages(source, settings.steps), settings.max_tokens * settings.steps, seed)
        lines = [clean_sentence(line) for line in reply.text.splitlines() if line.strip()][: settings.steps]
        complete = reply.finished or len(lines) == settings.steps
        for i, line in enumerate(lines):
            # only the last line can be cut at the token limit
            reason = check_member(line, complete or i < len(lines) - 1, members)
            if reason:
                return GeneratedList(tuple(members), reply.tokens, reason)
            members.append(line)
        return GeneratedList(tuple(members), reply.tokens, None if len(lines) == settings.steps else "incomplete")
    for step in range(1, settings.steps + 1):
        if step == 1 or settings.scale == 1:
            reply = engine.chat(messages(members[-1]), settings.max_tokens, seed)
        else:
            reply = engine.directional(messages(members[-1]), messages(members[-2]), settings.scale,
                                       settings.max_tokens)
        tokens += reply.tokens
        candidate = clean_sentence(reply.text)
        reason = check_member(candidate, reply.finished or "\n" in reply.text.strip(), members)
        if reason:
            return GeneratedList(tuple(members), tokens, reason)
        members.append(candidate)
    return GeneratedList(tuple(members), tokens, None)
