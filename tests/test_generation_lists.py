"""Seed 003's ranked lists from a tiny random Llama built here (core.generation): λ = 0 is plain greedy decoding,
at λ > 0 every chosen token is the argmax of (1+λ)·log p(·|ctx₁) − λ·log p(·|ctx₂) recomputed by hand from two
forward passes, the rule-based check ends a chain where it fails, the generation's items are cached, so a rerun
or a cancelled one makes nothing twice, and the written file is a list corpus the listmle recipe trains on."""

from __future__ import annotations

import json

import pytest
import torch

from core.data.provenance import sidecar_path
from core.errors import Cancelled, UserError
from core.generation.engines import LocalEngine, Reply
from core.generation.items import ItemCache
from core.generation.lists import ListSettings, check_member, clean_sentence, generate_list, messages
from core.generation.run import generate
from tests.tiny_model import build_tiny_causal_lm

SOURCES = ["a man is playing a guitar on the road.", "the dog runs in the park with a ball.",
           "film about war and love in the city.", "the team won the game last night at home.",
           "she reads a book under the tree by the river.", "the market price of fish fell this year."]


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    return build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "tiny-llama", stop_bias=0.04)


@pytest.fixture(scope="module")
def engine(lm_dir):
    return LocalEngine(lm_dir, "cpu")


@pytest.fixture(scope="module")
def unbiased(tmp_path_factory):
    """The same tiny Llama without the raised stop logit: its answers run to the token limit."""
    return LocalEngine(build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "unbiased"), "cpu")


def test_lambda_zero_is_plain_greedy_generate(engine):
    ids = engine.prompt_ids(messages(SOURCES[0]))
    plain = engine.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                                  eos_token_id=engine.stop_ids, pad_token_id=0)
    expected = engine.tokenizer.decode(plain[0, ids.shape[1]:], skip_special_tokens=True).strip()
    assert engine.chat(messages(SOURCES[0]), 12).text == expected
    assert engine.directional(messages(SOURCES[0]), messages(SOURCES[1]), 1.0, 12).text == expected


@pytest.mark.parametrize("lam", [0.5, 1.5])
def test_each_directional_token_is_the_argmax_of_eq_4(unbiased, lam):
    """Two full forward passes per step, no cache: the guided argmax, by hand, is the token the engine chose."""
    engine = unbiased
    cond, negative = messages(SOURCES[2]), messages(SOURCES[3])
    reply = engine.directional(cond, negative, 1 + lam, 10)
    ids, neg = engine.prompt_ids(cond), engine.prompt_ids(negative)
    chosen: list[int] = []
    disagreements = 0
    with torch.no_grad():
        for _ in range(reply.tokens):
            tail = torch.tensor([chosen], dtype=torch.long)
            p1 = torch.log_softmax(engine.model(torch.cat([ids, tail], 1)).logits[0, -1], -1)
            p2 = torch.log_softmax(engine.model(torch.cat([neg, tail], 1)).logits[0, -1], -1)
            token = int(torch.argmax((1 + lam) * p1 - lam * p2))
            disagreements += int(token != int(torch.argmax(p1)))
            chosen.append(token)
            if token in engine.stop_ids:
                break
    assert engine.tokenizer.decode(chosen, skip_special_tokens=True).strip() == reply.text
    assert len(chosen) == reply.tokens
    if lam == 1.5:
        assert disagreements > 0  # the guidance changed at least one choice: the test can tell the two apart


class Scripted:
    """An engine that answers from a script, to test the chain's checks: no model in the way."""

    kind, model_id, guided = "endpoint", "scripted", False

    def __init__(self, answers: list[Reply]) -> None:
        self.answers, self.calls = list(answers), 0

    def chat(self, messages, max_tokens, seed=0):
        self.calls += 1
        return self.answers.pop(0)

    def describe(self):
        return {"engine": "scripted"}


def test_the_chain_ends_at_the_first_member_that_fails_its_check():
    source = "a man is playing a guitar on the road."
    ok = [Reply("A man is playing a violin on the road.", 9, True), Reply("Sentence: A woman is playing a violin "
                                                                          "at home.", 9, True)]
    for bad, why in ((Reply("a man is playing a guitar on the road.", 9, True), "repeat"),
                     (Reply("A man plays", 3, False), "incomplete"), (Reply("", 1, True), "empty"),
                     (Reply("Short.", 2, True), "length")):
        item = generate_list(Scripted([*ok, bad, *ok]), source, ListSettings(method="stepwise", steps=5))
        assert item.dropped == why and len(item.members) == 3 and item.kept
        assert item.members[2] == "A woman is playing a violin at home."  # the label is cut off
    done = generate_list(Scripted(ok), source, ListSettings(method="stepwise", steps=2))
    assert done.dropped is None and done.tokens == 18
    assert check_member("x " * 9, True, ["one two three four"]) == "length"
    assert clean_sentence('\n  2. "A cat sleeps."\nmore') == "A cat sleeps."


def test_the_single_step_baseline_reads_a_numbered_list():
    answer = Reply("1. A man is playing a violin on the road.\n2. A woman is playing a violin at home.\n"
                   "3. A woman is singing at home tonight.", 30, True)
    item = generate_list(Scripted([answer]), "a man is playing a guitar on the road.",
                         ListSettings(method="single", steps=3))
    assert item.members[1:] == ("A man is playing a violin on the road.", "A woman is playing a violin at home.",
                                "A woman is singing at home tonight.") and item.dropped is None


def test_directional_control_on_an_endpoint_is_refused_in_one_line():
    with pytest.raises(UserError, match="local model folder") as caught:
        generate_list(Scripted([]), "a sentence", ListSettings())
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize("given, match", [({"lam": float("nan")}, "--lambda"), ({"lam": -1}, "--lambda"),
                                          ({"steps": 0}, "--steps"), ({"steps": 10**9}, "--steps"),
                                          ({"steps": 2.5}, "--steps"), ({"method": "beam"}, "--method"),
                                          ({"lam": "1.5"}, "--lambda")])
def test_hostile_list_settings_are_one_line(given, match):
    with pytest.raises(UserError, match=match):
        ListSettings(**given)


def test_a_generation_is_cached_item_by_item_and_a_rerun_makes_nothing(engine, tmp_path, contrastlab_home):
    source = tmp_path / "sources.csv"
    source.write_text("text\n" + "\n".join(f'"{s}"' for s in SOURCES) + "\n")
    out = tmp_path / "lists.csv"
    settings = ListSettings(method="stepwise", steps=4)  # the random model's directional chains end at once
    stops = iter([False, False, True])
    with pytest.raises(Cancelled):  # cancelled after two items: both kept
        generate("lists", engine, source, out, settings, should_stop=lambda: next(stops, True))
    cache = ItemCache()
    assert len(cache._items) == 2
    calls = []
    real = engine.chat
    engine.chat = lambda messages, *a, **k: calls.append(messages[-1]["content"]) or real(messages, *a, **k)
    try:
        outcome = generate("lists", engine, source, out, settings)
        first = len(calls)
        again = generate("lists", engine, source, out, settings)
    finally:
        engine.chat = real
    prompted = {f"Sentence: {s}" for s in SOURCES} & set(calls)
    assert prompted == {f"Sentence: {s}" for s in SOURCES[2:]}  # the two cancelled ones' items were kept
    assert len(calls) == first  # the rerun made nothing
    assert again.counts == outcome.counts and outcome.counts["finished"] == len(SOURCES)
    record = json.loads(sidecar_path(out).read_text())
    assert record["generator"]["engine"] == "local" and record["settings"]["lam"] == 0.0
    assert record["settings"]["steps"] == 4 and record["counts"] == outcome.counts
