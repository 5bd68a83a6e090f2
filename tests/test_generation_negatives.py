"""Seed 004's hard negatives (core.generation.negatives): the lenient reading of a model's answer and its strict
checks, the prompt's placeholders, and generate_negatives through the real openai client against a loopback server
(tests/openai_server.py): retries of malformed answers, the client's own retries, timeouts, a server that is gone,
and the API key that is sent but never shown."""

from __future__ import annotations

import json
import threading
import time

import pytest

from core.errors import UserError
from core.generation.engines import API_KEY_ENV, EndpointEngine
from core.generation.negatives import (
    SIMILARITY_LEVELS,
    MalformedAnswer,
    NegativeSettings,
    NegativesItem,
    generate_negatives,
    negatives_messages,
    parse_negatives,
)
from tests.openai_server import HANG, Answer, LoopbackServer, error

QUERY = "how do vaccines train the immune system"
POSITIVE = "Vaccines expose the immune system to a harmless antigen so that memory cells form."
NEGS = ["Vaccines are stored at low temperatures to keep the antigen stable.",
        "The immune system has innate and adaptive branches.",
        "Herd immunity protects people who cannot be vaccinated.",
        "Antibiotics kill bacteria but do not act on viruses."]


def paper(negatives=NEGS, positive=POSITIVE, levels=SIMILARITY_LEVELS) -> str:
    return json.dumps({"user_query": QUERY, "positive_document": positive,
                       "hard_negative_document": [{"similarity_level": level, "text": text}
                                                  for level, text in zip(levels, negatives)]})


def plain(negatives=NEGS, **extra) -> str:
    return json.dumps({"negatives": negatives, **extra})


@pytest.fixture(autouse=True)
def no_proxy_no_key(monkeypatch):
    """Loopback only: no proxy from the environment in between, no real key sent to the test server."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(API_KEY_ENV, raising=False)


# ---- parse_negatives: what is accepted ----

def test_the_papers_object_gives_texts_in_list_order():
    positive, negatives = parse_negatives(paper(), need_positive=True)
    assert positive == POSITIVE and negatives == NEGS


def test_the_levels_are_required_but_do_not_reorder():
    _, negatives = parse_negatives(paper(levels=("low", "medium", "high", "medium")), need_positive=False)
    assert negatives == NEGS
    broken = json.loads(paper())
    del broken["hard_negative_document"][2]["similarity_level"]
    with pytest.raises(MalformedAnswer, match="negative 3 has no similarity_level"):
        parse_negatives(json.dumps(broken), need_positive=False)


def test_a_fenced_object_with_sentences_around_it():
    text = f"  Sure! Here are the documents you asked for:\n```json\n{paper()}\n```\nLet me know if you need more.\n"
    assert parse_negatives(text, need_positive=True) == (POSITIVE, NEGS)


def test_prose_with_a_bracket_or_a_stray_brace_before_the_object():
    text = f"As noted in [1], a {{ can appear in prose. {plain()}"
    assert parse_negatives(text, need_positive=False) == (None, NEGS)


def test_the_plain_object_with_and_without_positive():
    assert parse_negatives(plain(), need_positive=False) == (None, NEGS)
    assert parse_negatives(plain(positive=f"  {POSITIVE} "), need_positive=True) == (POSITIVE, NEGS)
    assert parse_negatives(plain([f"  {n}\n" for n in NEGS]), need_positive=False)[1] == NEGS


def test_a_numbered_list_of_four_when_no_positive_is_needed():
    text = "Here they are:\n" + "\n".join(f"{k}. {n}" for k, n in enumerate(NEGS, 1)) + "\n"
    assert parse_negatives(text, need_positive=False) == (None, NEGS)
    with pytest.raises(MalformedAnswer, match="no JSON object"):
        parse_negatives(text, need_positive=True)
    with pytest.raises(MalformedAnswer, match="3 negatives, not 4"):
        parse_negatives("\n".join(f"{k}) {n}" for k, n in enumerate(NEGS[:3], 1)), need_positive=False)


# ---- parse_negatives: what is refused, and why ----

@pytest.mark.parametrize("text, need_positive, problem", [
    ("I cannot help with that request.", False, "no JSON object"),
    ("", False, "no JSON object"),
    (paper(NEGS[:3]), False, "3 negatives, not 4"),
    (plain(NEGS + ["one more"]), False, "5 negatives, not 4"),
    (plain([NEGS[0], "   ", NEGS[2], NEGS[3]]), False, "negative 2 is empty"),
    (plain([NEGS[0], NEGS[1], " " + NEGS[0].upper().replace(" ", "  "), NEGS[3]]), False,
     "negatives 1 and 3 are the same"),
    (plain([NEGS[0], POSITIVE.lower(), NEGS[2], NEGS[3]], positive=POSITIVE), False, "negative 2 is the positive"),
    (plain(), True, "no positive document"),
    (plain(positive="  "), True, "no positive document"),
    (paper(positive=""), True, "no positive document"),
    (plain([NEGS[0], 7, NEGS[2], NEGS[3]]), False, "negative 2 is not a string"),
    (plain("not a list"), False, "negatives is not a list"),
    (json.dumps(NEGS), False, "a JSON array, not an object"),
    (json.dumps([json.loads(plain())]), False, "a JSON array, not an object"),
    (json.dumps({"documents": NEGS}), False, "neither hard_negative_document nor negatives"),
    (json.dumps({"hard_negative_document": [{"similarity_level": "high"}] * 4}), False, "negative 1 has no text"),
])
def test_malformed_answers_say_what_was_wrong(text, need_positive, problem):
    with pytest.raises(MalformedAnswer, match=problem):
        parse_negatives(text, need_positive)


@pytest.mark.parametrize("junk", [
    "[" * 200_000,
    '{"a": ' * 100_000,
    '{"a": [' * 100_000 + "1" + "]}" * 99_999,
    "x" * 1_000_000,
    "{" * 1_000_000,
    '{"negatives": ["' + "word " * 200_000,
])
def test_deep_or_huge_junk_fails_quickly(junk):
    t0 = time.monotonic()
    with pytest.raises(MalformedAnswer):
        parse_negatives(junk, need_positive=False)
    assert time.monotonic() - t0 < 2


def test_a_megabyte_answer_holding_the_object_is_read_quickly():
    t0 = time.monotonic()
    assert parse_negatives("filler text. " * 80_000 + paper(), need_positive=True) == (POSITIVE, NEGS)
    assert time.monotonic() - t0 < 2


# ---- the prompt and its settings ----

def test_the_prompt_asks_for_the_papers_object_and_names_the_placeholders():
    settings = NegativeSettings(query_type="long-tail", difficulty="PhD", clarity="ambiguous", document_words=200)
    system, user = negatives_messages(QUERY, None, settings)
    assert system["role"] == "system" and user["role"] == "user"
    for part in (QUERY, "long-tail", "PhD", "ambiguous", "200 words", '"hard_negative_document"', '"user_query"',
                 '"positive_document"', "none is given"):
        assert part in user["content"]
    assert [e["similarity_level"] for e in json.loads(user["content"][user["content"].rindex("\n{"):])[
        "hard_negative_document"]] == list(SIMILARITY_LEVELS)
    given = negatives_messages(QUERY, "a {braced} positive", settings)[1]["content"]
    assert "a {braced} positive" in given and "none is given" not in given


def test_unknown_placeholders_raise_a_user_error_listing_the_allowed_values():
    with pytest.raises(UserError, match="difficulty 'grad school'; choose one of: high school, college, PhD"):
        NegativeSettings(difficulty="grad school")
    with pytest.raises(UserError, match="extremely long-tail, long-tail, common"):
        NegativeSettings(query_type="rare")
    with pytest.raises(UserError, match="from 50 to 500"):
        NegativeSettings(document_words=20)
    with pytest.raises(UserError, match="attempts"):
        NegativeSettings(attempts=0)


def test_the_key_changes_with_every_setting_and_is_json():
    base = NegativeSettings()
    json.dumps(base.key())
    changed = [NegativeSettings(clarity="ambiguous"), NegativeSettings(query_length="under 5 words"),
               NegativeSettings(document_words=300), NegativeSettings(attempts=1), NegativeSettings(max_tokens=2048)]
    keys = [json.dumps(s.key(), sort_keys=True) for s in [base, *changed]]
    assert len(set(keys)) == len(keys)
    assert base.key() == NegativeSettings().key()


# ---- NegativesItem for the cache ----

def test_an_item_round_trips_and_a_damaged_one_is_refused():
    done = NegativesItem(QUERY, POSITIVE, tuple(NEGS), 120, 2, None)
    failed = NegativesItem(QUERY, "", None, 30, 3, "3 negatives, not 4")
    for item in (done, failed):
        assert NegativesItem.from_dict(json.loads(json.dumps(item.to_dict()))) == item
    good = done.to_dict()
    for damaged in ({**good, "negatives": NEGS[:3]}, {**good, "error": "x"}, {**good, "tokens": "120"},
                    {**good, "negatives": None}, {**good, "attempts": 0}, {**good, "extra": 1}, [good], None,
                    {k: v for k, v in good.items() if k != "query"}):
        with pytest.raises(ValueError):
            NegativesItem.from_dict(damaged)


# ---- generate_negatives against the loopback server ----

def engine_for(server: LoopbackServer, retries: int = 0) -> EndpointEngine:
    return EndpointEngine(server.url, "tiny", timeout_s=1, retries=retries)


def test_a_clean_answer_gives_an_item():
    with LoopbackServer([Answer(paper(), completion_tokens=77)]) as server:
        item = generate_negatives(engine_for(server), QUERY, None, NegativeSettings(), seed=5)
    assert item == NegativesItem(QUERY, POSITIVE, tuple(NEGS), 77, 1, None)
    (request,) = server.requests
    assert request.body["model"] == "tiny" and request.body["temperature"] == 0 and request.body["seed"] == 5
    assert request.body["max_tokens"] == NegativeSettings().token_limit == 5 * 100 * 1.6 + 256
    assert request.body["messages"] == negatives_messages(QUERY, None, NegativeSettings())


def test_a_malformed_answer_is_asked_again_with_the_next_seed():
    answers = [Answer("no json here", completion_tokens=10), Answer(plain(), completion_tokens=40)]
    with LoopbackServer(answers) as server:
        item = generate_negatives(engine_for(server), QUERY, POSITIVE, NegativeSettings(), seed=3)
    assert item == NegativesItem(QUERY, POSITIVE, tuple(NEGS), 50, 2, None)
    assert [r.body["seed"] for r in server.requests] == [3, 4]


def test_a_negative_equal_to_the_given_positive_is_malformed():
    echo = plain([NEGS[0], POSITIVE, NEGS[2], NEGS[3]])
    with LoopbackServer(lambda body, call: echo) as server:
        item = generate_negatives(engine_for(server), QUERY, POSITIVE, NegativeSettings(attempts=2))
    assert item.negatives is None and item.error == "negative 2 is the positive" and len(server.requests) == 2


def test_always_malformed_gives_an_item_with_the_error_after_exactly_attempts_requests():
    with LoopbackServer(lambda body, call: Answer(paper(NEGS[:3]), completion_tokens=9)) as server:
        item = generate_negatives(engine_for(server), QUERY, None, NegativeSettings(attempts=3))
    assert len(server.requests) == 3
    assert item == NegativesItem(QUERY, "", None, 27, 3, "3 negatives, not 4")


def test_an_answer_cut_at_the_token_limit_says_so():
    with LoopbackServer([Answer(paper()[:200], finish_reason="length")]) as server:
        item = generate_negatives(engine_for(server), QUERY, None, NegativeSettings(attempts=1, max_tokens=64))
    assert item.negatives is None and item.error == "no JSON object (the answer stopped at the 64-token limit)"


def test_a_rate_limit_is_retried_by_the_client():
    with LoopbackServer([error(429, "slow down"), paper()]) as server:
        item = generate_negatives(engine_for(server, retries=1), QUERY, None, NegativeSettings())
    assert item.negatives == tuple(NEGS) and item.attempts == 1 and len(server.requests) == 2


def test_a_hanging_server_is_a_user_error_naming_the_endpoint():
    with LoopbackServer([HANG]) as server:
        t0 = time.monotonic()
        with pytest.raises(UserError, match=f"The endpoint {server.url} did not answer within 1 s"):
            generate_negatives(engine_for(server), QUERY, None, NegativeSettings())
        assert time.monotonic() - t0 < 4


def test_closing_the_server_ends_a_hanging_request_at_once():
    server = LoopbackServer([HANG])
    engine = EndpointEngine(server.url, "tiny", timeout_s=30, retries=0)
    raised: list[BaseException] = []
    call = threading.Thread(target=lambda: _catch(raised, engine))
    call.start()
    deadline = time.monotonic() + 3
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    server.close()
    call.join(timeout=5)
    assert not call.is_alive() and time.monotonic() - t0 < 2
    assert isinstance(raised[0], UserError) and server.url in str(raised[0])


def _catch(raised: list[BaseException], engine: EndpointEngine) -> None:
    try:
        generate_negatives(engine, QUERY, None, NegativeSettings())
    except BaseException as exc:  # noqa: BLE001 - the test checks what it was
        raised.append(exc)


def test_nothing_listening_is_a_one_line_user_error():
    with LoopbackServer([]) as server:
        engine = engine_for(server)
    with pytest.raises(UserError, match=f"Could not reach the endpoint {server.url}") as caught:
        generate_negatives(engine, QUERY, None, NegativeSettings())
    assert "\n" not in str(caught.value)


def test_a_server_error_on_every_try_is_a_user_error_naming_the_status():
    with (LoopbackServer(lambda body, call: error(500, "model crashed")) as server,
          pytest.raises(UserError, match="answered 500 for model 'tiny'.*model crashed") as caught):
        generate_negatives(engine_for(server, retries=1), QUERY, None, NegativeSettings())
    assert len(server.requests) == 2 and server.url in str(caught.value) and "\n" not in str(caught.value)


# ---- the API key ----

def test_the_key_is_sent_but_never_shown(monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, "sk-test-secret")
    with LoopbackServer([paper()]) as server:
        engine = engine_for(server)
        item = generate_negatives(engine, QUERY, None, NegativeSettings())
    assert server.requests[0].headers["authorization"] == "Bearer sk-test-secret"
    for shown in (repr(engine), json.dumps(engine.describe()), json.dumps(item.to_dict())):
        assert "sk-test-secret" not in shown


def test_without_a_key_a_placeholder_is_sent():
    with LoopbackServer([paper()]) as server:
        generate_negatives(engine_for(server), QUERY, None, NegativeSettings())
    assert server.requests[0].headers["authorization"] == "Bearer none"
