"""The CPU encode pool (core.models.encode_pool): the same outputs as encoding in-process, a model re-shipped when
its weights change, cancelling and a killed worker, idle workers stopped and started again, and the policy that
decides when the pool is used.

The suite runs torch on one thread (conftest), so encode stays in-process unless CONTRASTLAB_ENCODE_WORKERS forces
the pool, as `pool_on` does; the tests share one pool (starting its workers costs seconds) and stop it at the end.
The idle test stops the workers and starts them once more; the test that kills a worker comes last: it leaves the
pool stopped."""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from core.errors import Cancelled, UserError
from core.models import encode as enc
from core.models import encode_pool
from core.models.ata import build_ata_model
from core.models.loading import model_fingerprint
from core.training.top_layers import top_layers_view

WORDS = "the film was good and a very long sentence about the sea near the city where children play music".split()
TEXTS = [" ".join(WORDS[i % 7 : i % 7 + 1 + i % 13]) for i in range(40)]  # lengths 1 to 13 words, in no order
BATCH = 4  # 10 batches: enough for 2 workers (the policy wants 2 batches per worker)
WAIT_S = 120  # a hung encode fails the test instead of the suite


@pytest.fixture(scope="module")
def pool_on():
    """CONTRASTLAB_ENCODE_WORKERS=2 for the module's tests, stopped workers started for their small encodes too; the
    pool stopped afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(encode_pool.ENV, "2")
        mp.setattr(encode_pool, "COLD_START_BATCHES", 0)
        yield
    encode_pool.shutdown()


def in_process(model, texts, monkeypatch, **kwargs) -> enc.Encoded:
    with monkeypatch.context() as mp:
        mp.setenv(encode_pool.ENV, "0")
        return enc.encode(model, texts, batch_size=BATCH, **kwargs)


def workers_alive(pool: encode_pool.EncodePool) -> list[int]:
    return [proc.pid for proc in pool.procs if proc.poll() is None]


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_pool_gives_the_in_process_outputs(tiny_model, pool_on, monkeypatch):
    expected = in_process(tiny_model, TEXTS, monkeypatch, layers=True)
    calls = []
    got = enc.encode(tiny_model, TEXTS, batch_size=BATCH, layers=True, progress=lambda d, n: calls.append((d, n)))
    pool = encode_pool.pool_for(tiny_model, len(TEXTS) // BATCH)
    assert pool.model_key == model_fingerprint(tiny_model)  # it ran in the workers, not in-process
    assert len(workers_alive(pool)) == 2
    np.testing.assert_allclose(got.embeddings, expected.embeddings, atol=1e-5)
    np.testing.assert_allclose(got.layers, expected.layers, atol=1e-5)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and calls[-1] == (len(TEXTS), len(TEXTS))
    assert len(calls) == len(TEXTS) // BATCH


def test_streamed_cache_entries_match(tiny_model, pool_on, monkeypatch):
    expected = in_process(tiny_model, TEXTS, monkeypatch, layers=True)
    layers = enc.encode_cached(tiny_model, TEXTS, layers=True, batch_size=BATCH)
    np.testing.assert_allclose(layers, expected.layers, atol=1e-5)
    monkeypatch.setattr(enc, "encode", lambda *a, **k: pytest.fail("the pooled entry was not streamed"))
    np.testing.assert_allclose(enc.encode_cached(tiny_model, TEXTS, batch_size=BATCH), expected.embeddings, atol=1e-5)


def test_changed_weights_are_shipped_again(tiny_model, pool_on, monkeypatch):
    model = copy.deepcopy(tiny_model)
    before = enc.encode(model, TEXTS, batch_size=BATCH).embeddings
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.5)  # in place, as an optimiser step changes them: the same object, new weights
    after = enc.encode(model, TEXTS, batch_size=BATCH).embeddings
    np.testing.assert_allclose(after, in_process(model, TEXTS, monkeypatch).embeddings, atol=1e-5)
    assert np.abs(after - before).max() > 1e-3


def test_an_ata_model_runs_in_the_pool_too(tiny_model, pool_on, monkeypatch):
    ata = build_ata_model(tiny_model)  # our own modules, and pooling that asks the transformer for attentions
    got = enc.encode(ata, TEXTS, batch_size=BATCH, layers=True)
    assert encode_pool.pool_for(ata, len(TEXTS) // BATCH).model_key == model_fingerprint(ata)
    expected = in_process(ata, TEXTS, monkeypatch, layers=True)
    np.testing.assert_allclose(got.embeddings, expected.embeddings, atol=1e-5)
    np.testing.assert_allclose(got.layers, expected.layers, atol=1e-5)


def test_a_model_that_cannot_be_pickled_is_encoded_in_process(tiny_model, pool_on, monkeypatch):
    model = copy.deepcopy(tiny_model)
    with torch.no_grad():
        next(model.parameters()).add_(0.1)  # new weights: the workers do not hold this model
    model.lock = threading.Lock()  # pickle refuses locks
    pool = encode_pool.pool_for(model, len(TEXTS) // BATCH)
    held = pool.model_key
    got = enc.encode(model, TEXTS, batch_size=BATCH).embeddings
    np.testing.assert_allclose(got, in_process(model, TEXTS, monkeypatch).embeddings, atol=1e-5)
    assert pool.model_key == held  # nothing shipped: encoded in this process


def test_cancel_stops_and_the_next_call_is_clean(tiny_model, pool_on, monkeypatch):
    def cancel(done: int, total: int) -> None:
        raise Cancelled("stopped")

    pool = encode_pool.pool_for(tiny_model, len(TEXTS) // BATCH)
    with pytest.raises(Cancelled):
        enc.encode(tiny_model, TEXTS, batch_size=BATCH, progress=cancel)
    assert any(pool.busy)  # a batch was still under way in the other worker when the call stopped
    others = [t.upper() + " sea" for t in TEXTS]
    got = enc.encode(tiny_model, others, batch_size=BATCH).embeddings
    np.testing.assert_allclose(got, in_process(tiny_model, others, monkeypatch).embeddings, atol=1e-5)
    assert encode_pool.pool_for(tiny_model, len(TEXTS) // BATCH) is pool and not any(pool.busy)


def fail(model, texts):
    """A batch function that fails in the worker."""
    raise ValueError(f"no thanks to {len(texts)} texts")


def test_a_worker_exception_raises_with_its_message(tiny_model, pool_on):
    pool = encode_pool.pool_for(tiny_model, len(TEXTS) // BATCH)
    batches = [np.arange(i, i + BATCH) for i in range(0, len(TEXTS), BATCH)]
    with pytest.raises(RuntimeError, match=r"failed: ValueError: no thanks to 4 texts"):
        pool.run(tiny_model, TEXTS, batches, fail, (), lambda rows, result: None)
    got = enc.encode(tiny_model, TEXTS, batch_size=BATCH).embeddings  # the pool carries on
    assert got.shape[0] == len(TEXTS) and not pool.closed


def test_idle_workers_stop_and_start_again(tiny_model, pool_on, monkeypatch):
    enc.encode(tiny_model, TEXTS, batch_size=BATCH)  # workers up (kept from the last test when the file runs whole)
    pool = encode_pool.pool_for(tiny_model, len(TEXTS) // BATCH)
    stale, before = pool.timer, workers_alive(pool)  # the idle timer that encode armed (60 s); its workers
    assert stale is not None and len(before) == 2
    monkeypatch.setenv(encode_pool.IDLE_ENV, "0.5")
    # That timer firing just as an encode takes the workers: superseded, it leaves them be.
    enc.encode(tiny_model, TEXTS, batch_size=BATCH, progress=lambda d, n: pool.idle_stop(stale))
    assert workers_alive(pool) == before and pool.timer is not None
    deadline = time.monotonic() + WAIT_S
    while any(map(running, before)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(running, before)), "idle workers were not stopped"
    assert pool.procs == [] and pool.model_key is None and not pool.closed

    # The next encode starts them again and ships the model again; with 0 s idle they stop as it ends.
    monkeypatch.setenv(encode_pool.IDLE_ENV, "0")
    seen: list[tuple[list[int], str | None]] = []
    got = enc.encode(tiny_model, TEXTS, batch_size=BATCH,
                     progress=lambda d, n: seen.append((workers_alive(pool), pool.model_key)))
    assert encode_pool.pool_for(tiny_model, len(TEXTS) // BATCH) is pool
    restarted, shipped = seen[0]
    assert len(restarted) == 2 and not set(restarted) & set(before)
    assert shipped == model_fingerprint(tiny_model)  # it ran in the new workers
    assert not any(map(running, restarted)) and pool.procs == [] and pool.timer is None
    np.testing.assert_allclose(got.embeddings, in_process(tiny_model, TEXTS, monkeypatch).embeddings, atol=1e-5)


@pytest.mark.parametrize("value", ["x", "-1", "-inf", "inf", "nan", "1e999", "9" * 5000, "1 s"])
def test_bad_idle_times_are_one_user_error_line(value, tiny_model, monkeypatch):
    monkeypatch.setenv(encode_pool.IDLE_ENV, value)  # refused even where encode stays in-process
    with pytest.raises(UserError) as raised:
        enc.encode(tiny_model, TEXTS, batch_size=BATCH)
    message = str(raised.value)
    assert encode_pool.IDLE_ENV in message and "\n" not in message and len(message) < 200


def test_idle_times(monkeypatch):
    for value, expected in [("", 60), ("  ", 60), ("0", 0), (" 0.5 ", 0.5), ("90", 90),
                            ("1e300", threading.TIMEOUT_MAX)]:
        monkeypatch.setenv(encode_pool.IDLE_ENV, value)
        assert encode_pool.idle_seconds() == expected, value
    monkeypatch.delenv(encode_pool.IDLE_ENV)
    assert encode_pool.idle_seconds() == encode_pool.IDLE_S == 60


@pytest.mark.parametrize("value", ["x", "-1", "1e9", "2.5", "9" * 5000])
def test_bad_worker_counts_are_one_user_error_line(value, tiny_model, monkeypatch):
    monkeypatch.setenv(encode_pool.ENV, value)
    with pytest.raises(UserError) as raised:
        enc.encode(tiny_model, TEXTS, batch_size=BATCH)
    message = str(raised.value)
    assert encode_pool.ENV in message and "\n" not in message and len(message) < 200


def test_worker_counts(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    for value, expected in [("", 2), ("  ", 2), (" 3 ", 3), ("0", 0), ("1", 1), ("9" * 40, 4)]:
        monkeypatch.setenv(encode_pool.ENV, value)
        assert encode_pool.workers() == expected, value
    monkeypatch.delenv(encode_pool.ENV)
    assert encode_pool.workers() == 2  # the cores, capped by torch's threads
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert encode_pool.workers() == 1
    monkeypatch.setenv(encode_pool.ENV, "8")
    assert encode_pool.workers() == 2  # an explicit count can force the pool even on one core


class Stub:
    """What the policy reads of a model: its device and its first module's auto_model."""

    def __init__(self, device: str, auto_model: object) -> None:
        self.device = torch.device(device)
        self.auto_model = auto_model

    def __getitem__(self, index: int) -> Stub:
        return self


def test_policy(tiny_model, monkeypatch):
    monkeypatch.setenv(encode_pool.ENV, "2")
    assert encode_pool.pool_size(tiny_model, 4) == 2
    assert encode_pool.pool_size(tiny_model, 3) == 0  # under 2 batches per worker
    assert encode_pool.pool_size(tiny_model, 100, attentions=True) == 0
    assert encode_pool.pool_size(Stub("cuda", tiny_model[0].auto_model), 100) == 0
    assert encode_pool.pool_size(Stub("cpu", torch.nn.Linear(2, 2)), 100) == 0
    with top_layers_view(tiny_model, 1):
        assert encode_pool.pool_size(tiny_model, 100) == 0  # TopLayers reads states cached in this process
    for value in ("0", "1"):
        monkeypatch.setenv(encode_pool.ENV, value)
        assert encode_pool.pool_size(tiny_model, 100) == 0
    monkeypatch.delenv(encode_pool.ENV)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # a process told to use one thread (the suite's)
    assert encode_pool.pool_size(tiny_model, 100) == 0  # in-process


def test_a_killed_worker_raises_in_the_parent(tiny_model, pool_on):
    pool = encode_pool.pool_for(tiny_model, len(TEXTS) // BATCH)
    killed, pids = [], []

    def kill_one(done: int, total: int) -> None:
        if not killed:
            pids.extend(workers_alive(pool))
            killed.append(pool.procs[0].pid)
            os.kill(killed[0], signal.SIGKILL)

    with ThreadPoolExecutor(1) as run:
        future = run.submit(enc.encode, tiny_model, TEXTS, batch_size=BATCH, progress=kill_one)
        with pytest.raises(RuntimeError, match=r"killed by signal 9 \(SIGKILL\)") as raised:
            future.result(timeout=WAIT_S)
    assert f"pid {killed[0]}" in str(raised.value)
    assert pool.closed and len(pids) == 2 and not any(map(running, pids))  # the other worker was stopped with it


def test_stopped_workers_are_not_started_for_a_short_encode(tiny_model, monkeypatch):
    """Starting the workers costs seconds: a short encode runs in-process unless they are already running."""
    encode_pool.shutdown()
    monkeypatch.setenv(encode_pool.ENV, "2")
    monkeypatch.setattr(encode_pool, "COLD_START_BATCHES", 64)  # the module's pool_on fixture may have lowered it
    assert encode_pool.pool_for(tiny_model, 63) is None
    assert encode_pool.pool_for(tiny_model, 64) is not None


def test_stopped_workers_are_started_only_when_other_work_holds_a_core(tiny_model, monkeypatch):
    """On an idle machine a cold pool's 6-8 s start bought nothing: a run's after-evaluation took 29.7-35.3 s through
    it and 23.9-29.2 s in-process. Left to the default, stopped workers start only beside other work;
    CONTRASTLAB_ENCODE_WORKERS still asks for them."""
    encode_pool.shutdown()
    monkeypatch.delenv(encode_pool.ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    free = [2]
    monkeypatch.setattr(encode_pool, "free_cores", lambda: free[0])
    assert encode_pool.pool_for(tiny_model, 64) is None  # idle
    free[0] = 1
    pool = encode_pool.pool_for(tiny_model, 64)  # another job holds a core
    assert pool is not None and not pool.procs  # made; its workers start with its first encode
    monkeypatch.setenv(encode_pool.ENV, "2")
    free[0] = 2
    assert encode_pool.pool_for(tiny_model, 64) is pool
    encode_pool.shutdown()
