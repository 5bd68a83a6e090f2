"""torch's CPU threads sized from the cores other work leaves free (issue 32, item 3): beside a process spinning on
both cores, 1,000 texts took 13.8 s on 2 threads and 8.0 s on 1. An in-process encode and training use the free
cores, never more threads than they had, and give them back after."""

from __future__ import annotations

import os

import pytest
import torch

import core.models.encode as encode_module
from core.models import threads
from core.models.encode import SIZED_BATCHES, encode


def _record_threads(monkeypatch, owner, name: str) -> list[int]:
    """torch's thread count each time owner.name (a function or method) runs, in order."""
    seen: list[int] = []
    real = getattr(owner, name)

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return seen


@pytest.fixture
def two_cores(monkeypatch):
    """A 2-core machine whose cores' use the test sets."""
    use = {"percent": [0.0, 0.0], "calls": 0}

    def cpu_percent(interval=None, percpu=False):
        use["calls"] += 1
        return list(use["percent"])

    monkeypatch.setattr(threads.psutil, "cpu_percent", cpu_percent)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    return use


@pytest.mark.parametrize(("percent", "free"), [([0.0, 3.0], 2), ([100.0, 100.0], 1), ([95.0, 10.0], 1),
                                               ([49.9, 50.0], 1)])
def test_free_cores_counts_the_usable_cores_others_leave(two_cores, percent, free):
    two_cores["percent"] = percent
    assert threads.free_cores() == free


def test_only_the_cores_this_process_may_use_count(two_cores, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1})
    two_cores["percent"] = [0.0, 100.0]  # core 0 is free but not ours
    assert threads.free_cores() == 1


def test_threads_follow_the_free_cores_and_are_given_back(two_cores):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two_cores["percent"] = [100.0, 100.0]
        with threads.threads_for_free_cores() as n:
            assert n == torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        two_cores["percent"] = [0.0, 0.0]
        with threads.threads_for_free_cores() as n:
            assert n == torch.get_num_threads() == 2
        torch.set_num_threads(1)  # told to use one (a Ray task, a DDP rank): never more, and no sampling
        calls = two_cores["calls"]
        with threads.threads_for_free_cores() as n:
            assert n == 1 and two_cores["calls"] == calls
    finally:
        torch.set_num_threads(before)


def test_an_in_process_encode_runs_on_the_free_cores(two_cores, tiny_model, monkeypatch):
    monkeypatch.setenv("CONTRASTLAB_ENCODE_WORKERS", "0")
    seen = _record_threads(monkeypatch, encode_module, "encode_batch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two_cores["percent"] = [100.0, 100.0]
        texts = [f"text number {i}" for i in range(SIZED_BATCHES * 8)]
        encode(tiny_model, texts, batch_size=8)
        assert seen == [1] * SIZED_BATCHES and torch.get_num_threads() == 2
        seen.clear()
        encode(tiny_model, texts[:8], batch_size=8)  # one batch: not worth a sample
        assert seen == [2]
    finally:
        torch.set_num_threads(before)


def test_training_on_the_cpu_runs_on_the_free_cores(two_cores, tiny_model_dir, contrastlab_home, monkeypatch):
    import transformers

    from tests.conftest import train_tiny_run

    seen = _record_threads(monkeypatch, transformers.Trainer, "training_step")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two_cores["percent"] = [100.0, 100.0]
        train_tiny_run(contrastlab_home, tiny_model_dir)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_caching_the_frozen_layers_runs_on_the_free_cores(two_cores, tiny_model, monkeypatch):
    """The quick point's first phase ran at 36 texts/s beside other work (issue 32): its own in-process pass."""
    from core.training import top_layers

    seen = _record_threads(monkeypatch, top_layers.TopLayers, "lower")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two_cores["percent"] = [100.0, 100.0]
        with top_layers.top_layers_view(tiny_model, 1, [f"a text about {i}" for i in range(40)]):
            assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
