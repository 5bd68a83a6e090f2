"""Seed 004's multi-granularity hard negatives: for a query and its positive document (or a query alone, the
positive then written too) a chat model writes four negatives in decreasing similarity to the query, hardest
first ("high", "medium", "medium", "low"), as one JSON object. The prompt names the kind of query and documents
(its placeholders, NegativeSettings); the answer is read leniently (a code fence or a sentence around the object,
a plain {"negatives": [...]} or a numbered list) but checked strictly: four distinct, non-empty negatives, none
equal to the positive. A malformed answer is asked again; a row still malformed after its attempts is kept as a
failure, not raised, so one bad row cannot stop a generation of thousands."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

from core.errors import UserError, shorten
from core.generation.engines import Engine, Messages

NEGATIVES = 4
TOKENS_PER_WORD = 1.6  # English prose in a Llama-3 or GPT tokenizer takes about 1.3-1.5 tokens a word; some margin
ANSWER_OVERHEAD_TOKENS = 256  # the JSON keys, the similarity levels and the echoed query
SIMILARITY_LEVELS = ("high", "medium", "medium", "low")  # negative k's similarity to the query, hardest first
QUERY_TYPES = ("extremely long-tail", "long-tail", "common")
QUERY_LENGTHS = ("under 5 words", "5 to 15 words", "at least 10 words")
DIFFICULTIES = ("high school", "college", "PhD")
CLARITIES = ("clear", "understandable with some effort", "ambiguous")
DOCUMENT_WORDS = (50, 500)  # the range of document lengths, in words, the prompt may ask for
MAX_STARTS = 100  # '{' or '[' positions tried as a JSON start: bounds the work on a huge or deeply nested answer
_NUMBERED = re.compile(r"^\s*(\d{1,3})[.):]\s+(.*\S)\s*$")

SYSTEM = ("You create training data for a search engine's retrieval model. You reply with a single JSON object and "
          "no other text.")
TASK = """Search query: {query}
{positive}
The query is a {query_type} query of {query_length}, {clarity}, and asks for knowledge at {difficulty} level.

Write {negatives} hard negative documents for this query, each about {words} words. A hard negative shares the \
query's topic, terms or named entities, so a careless search engine would rank it high, yet it does not answer \
the query: it may answer a related but different question, leave out exactly what the query asks for, or get the \
key fact wrong. Order them from the most to the least similar to the query: the first very close (similarity \
"high"), the second and third moderately close ("medium"), the fourth only loosely connected ("low"). No document \
may copy another or the relevant document, and none may say that it is a negative.

Reply with this JSON object only:
{shape}"""
SHAPE = json.dumps({"user_query": "<the search query, unchanged>", "positive_document": "<the relevant document>",
                    "hard_negative_document": [{"similarity_level": level, "text": "..."}
                                               for level in SIMILARITY_LEVELS]})
GIVEN_POSITIVE = "Relevant document (it answers the query; copy it unchanged into positive_document):\n{positive}\n"
WRITE_POSITIVE = ("Relevant document: none is given. First write one of about {words} words that fully answers the "
                  "query, and put it in positive_document.\n")


class MalformedAnswer(Exception):
    """A model's answer that does not hold the negatives as asked; the message says what was wrong in a few words."""


def _choice(value: object, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise UserError(f"Unknown {what} {shorten(value)}; choose one of: {', '.join(allowed)}.")


def _whole(value: object, low: int, high: int | None, what: str) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= low
            and (high is None or value <= high)):
        bound = f"from {low} to {high}" if high is not None else f"of {low} or more"
        raise UserError(f"The {what} must be a whole number {bound}, got {shorten(value)}.")


@dataclass(frozen=True)
class NegativeSettings:
    """The prompt's placeholders and the retry budget: what changes a row's negatives, so a cached row is reused
    only under the same settings (key()). The defaults describe an ordinary search: a common query of 5 to 15
    words, clear, at college level, against passage-length documents of 100 words. max_tokens None: room for the
    five documents of the answer (four negatives and the echoed positive) at TOKENS_PER_WORD, plus the JSON and the
    query (token_limit)."""

    query_type: str = "common"
    query_length: str = "5 to 15 words"
    difficulty: str = "college"
    clarity: str = "clear"
    document_words: int = 100
    attempts: int = 3
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        _choice(self.query_type, QUERY_TYPES, "query type")
        _choice(self.query_length, QUERY_LENGTHS, "query length")
        _choice(self.difficulty, DIFFICULTIES, "difficulty")
        _choice(self.clarity, CLARITIES, "clarity")
        _whole(self.document_words, *DOCUMENT_WORDS, "document length in words")
        _whole(self.attempts, 1, None, "number of attempts")
        if self.max_tokens is not None:
            _whole(self.max_tokens, 1, None, "token limit of an answer")

    @property
    def token_limit(self) -> int:
        """The answer's token limit: max_tokens, else enough for five documents of document_words each."""
        if self.max_tokens is not None:
            return self.max_tokens
        return int((NEGATIVES + 1) * self.document_words * TOKENS_PER_WORD) + ANSWER_OVERHEAD_TOKENS

    def key(self) -> dict:
        """Everything that changes the output, prompt text included (a reworded prompt makes every row again)."""
        return {**asdict(self), "prompt": [SYSTEM, TASK, SHAPE, GIVEN_POSITIVE, WRITE_POSITIVE]}


def negatives_messages(query: str, positive: str | None, settings: NegativeSettings) -> Messages:
    """The chat messages asking for one row's negatives (and its positive when `positive` is None)."""
    words = settings.document_words
    given = (GIVEN_POSITIVE.format(positive=positive) if positive is not None
             else WRITE_POSITIVE.format(words=words))
    task = TASK.format(query=query, positive=given, query_type=settings.query_type,
                       query_length=settings.query_length, clarity=settings.clarity,
                       difficulty=settings.difficulty, negatives=NEGATIVES, words=words, shape=SHAPE)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _json_object(text: str) -> dict | None:
    """The first JSON object in `text`, whatever wraps it (a code fence, sentences); None when there is none. A
    top-level array of strings or objects is refused rather than searched, since it is not the shape asked for."""
    decoder = json.JSONDecoder()
    start, tries = 0, 0
    while tries < MAX_STARTS:
        brace, bracket = text.find("{", start), text.find("[", start)
        found = [i for i in (brace, bracket) if i >= 0]
        if not found:
            return None
        start, tries = min(found), tries + 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):  # not JSON from here, or nested past Python's limit
            start += 1
            continue
        if isinstance(value, dict):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str | dict) for v in value):
            raise MalformedAnswer("a JSON array, not an object")
        start = end  # a list of numbers in the prose ("see [1]"): look past it
    return None


def _numbered(text: str) -> list[str] | None:
    """A numbered list's items ("1. …" lines, other lines ignored), quotes around an item removed; None if none."""
    items = [(int(m[1]), m[2]) for m in map(_NUMBERED.match, text.splitlines()) if m]
    if not items:
        return None
    if len(items) == NEGATIVES and [n for n, _ in items] != list(range(1, NEGATIVES + 1)):
        raise MalformedAnswer(f"the list is not numbered 1 to {NEGATIVES}")
    return [t[1:-1] if len(t) >= 2 and t[0] == t[-1] == '"' else t for _, t in items]


def _from_paper(entries: object) -> list:
    """The texts of the paper's hard_negative_document list, in its order (hardest first)."""
    if not isinstance(entries, list):
        raise MalformedAnswer("hard_negative_document is not a list")
    texts = []
    for k, entry in enumerate(entries, 1):
        if not (isinstance(entry, dict) and "text" in entry):
            raise MalformedAnswer(f"negative {k} has no text")
        if not (isinstance(entry.get("similarity_level"), str) and entry["similarity_level"].strip()):
            raise MalformedAnswer(f"negative {k} has no similarity_level")
        texts.append(entry["text"])
    return texts


def check_distinct(negatives: list[str], positive: str | None) -> None:
    """Raise MalformedAnswer when two negatives are the same, or one is the positive (case and spacing aside)."""
    seen: dict[str, int] = {}
    for k, text in enumerate(negatives, 1):
        norm = _norm(text)
        if norm in seen:
            raise MalformedAnswer(f"negatives {seen[norm]} and {k} are the same")
        if positive is not None and norm == _norm(positive):
            raise MalformedAnswer(f"negative {k} is the positive")
        seen[norm] = k


def parse_negatives(text: str, need_positive: bool) -> tuple[str | None, list[str]]:
    """(positive or None, the four negatives hardest first, stripped) from a model's answer: the paper's object,
    {"negatives": [...], "positive": ...}, or (without a JSON object, when no positive is needed) a numbered list
    of four. Raises MalformedAnswer saying what was wrong."""
    found = _json_object(text)
    if found is None:
        listed = None if need_positive else _numbered(text)
        if listed is None:
            raise MalformedAnswer("no JSON object")
        raw, positive = listed, None
    elif "hard_negative_document" in found:
        raw, positive = _from_paper(found["hard_negative_document"]), found.get("positive_document")
    elif "negatives" in found:
        raw, positive = found["negatives"], found.get("positive")
        if not isinstance(raw, list):
            raise MalformedAnswer("negatives is not a list")
    else:
        raise MalformedAnswer("the JSON object has neither hard_negative_document nor negatives")
    if len(raw) != NEGATIVES:
        raise MalformedAnswer(f"{len(raw)} negative{'' if len(raw) == 1 else 's'}, not {NEGATIVES}")
    negatives = []
    for k, negative in enumerate(raw, 1):
        if not isinstance(negative, str):
            raise MalformedAnswer(f"negative {k} is not a string")
        if not negative.strip():
            raise MalformedAnswer(f"negative {k} is empty")
        negatives.append(negative.strip())
    if positive is not None and not isinstance(positive, str):
        raise MalformedAnswer("the positive is not a string")
    positive = (positive or "").strip() or None
    if need_positive and positive is None:
        raise MalformedAnswer("no positive document")
    check_distinct(negatives, positive)
    return positive, negatives


@dataclass(frozen=True)
class NegativesItem:
    """One row's outcome: its negatives hardest first, or None with `error` (the last attempt's MalformedAnswer);
    `positive` is the given one, else the generated one ("" when none came); `tokens` over all `attempts`."""

    query: str
    positive: str
    negatives: tuple[str, ...] | None
    tokens: int
    attempts: int
    error: str | None

    def to_dict(self) -> dict:
        return {**asdict(self), "negatives": list(self.negatives) if self.negatives is not None else None}

    @classmethod
    def from_dict(cls, data: dict) -> NegativesItem:
        """The item a cache line holds; ValueError for anything else (another version's entry, a damaged one)."""
        fields = set(cls.__dataclass_fields__)
        if not (isinstance(data, dict) and set(data) == fields):
            raise ValueError("not a negatives item")
        negatives, error, tokens, attempts = data["negatives"], data["error"], data["tokens"], data["attempts"]
        texts = isinstance(data["query"], str) and isinstance(data["positive"], str)
        counts = all(isinstance(n, int) and not isinstance(n, bool) for n in (tokens, attempts))
        done = (error is None and isinstance(negatives, list) and len(negatives) == NEGATIVES
                and all(isinstance(n, str) for n in negatives))
        failed = negatives is None and isinstance(error, str)
        if not (texts and counts and tokens >= 0 and attempts >= 1 and (done or failed)):
            raise ValueError("not a negatives item")
        return cls(data["query"], data["positive"], tuple(negatives) if done else None, tokens, attempts, error)


def generate_negatives(engine: Engine, query: str, positive: str | None, settings: NegativeSettings,
                       seed: int = 0) -> NegativesItem:
    """One row's negatives, asking again (seed + attempt) after a malformed answer, settings.attempts times in all;
    still malformed, the item carries the last error instead of negatives. A UserError from the engine (a server
    down, a timeout) is not caught: it concerns every row, so it stops the generation. A local engine decodes
    greedily and ignores the seed, so its retries repeat the first answer."""
    messages = negatives_messages(query, positive, settings)
    tokens, error = 0, ""
    for attempt in range(settings.attempts):
        reply = engine.chat(messages, settings.token_limit, seed + attempt)
        tokens += reply.tokens
        try:
            found, negatives = parse_negatives(reply.text, need_positive=positive is None)
            if positive is not None:
                check_distinct(negatives, positive)
        except MalformedAnswer as exc:
            cut = "" if reply.finished else f" (the answer stopped at the {settings.token_limit}-token limit)"
            error = f"{exc}{cut}"
            continue
        kept = positive if positive is not None else found or ""  # found is there: need_positive asked for it
        return NegativesItem(query, kept, tuple(negatives), tokens, attempt + 1, None)
    return NegativesItem(query, positive or "", None, tokens, settings.attempts, error)
