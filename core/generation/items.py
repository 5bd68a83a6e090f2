"""A generation as a job: items (a list, a row of negatives) made one by one, each kept in a cache as soon as it is
done, so a cancel keeps every finished item and a rerun or a crash regenerates nothing that is done.

An item's key is the engine's model id (a folder's fingerprint, or the endpoint and its model name), the method's
settings (prompt text included) and the item's input: change any and the item is made again."""

from __future__ import annotations

import fcntl
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from core.errors import Cancelled
from core.storage import cache_dir

T = TypeVar("T")


def item_key(model_id: str, settings: dict, item: object) -> str:
    """The cache key of one item: 32 hex digits over everything that changes its output."""
    text = json.dumps([model_id, settings, item], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class ItemCache:
    """Finished items as JSON lines, appended under a file lock and flushed one by one: a crash loses at most the
    item being written, and a torn last line is skipped when read back."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_dir("generation") / "items.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._items: dict[str, dict] = {}
        self._read()

    def _read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("r", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                    self._items[str(entry["key"])] = entry["value"]
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a crash

    def get(self, key: str) -> dict | None:
        return self._items.get(key)

    def put(self, key: str, value: dict) -> None:
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # two generations at once append whole lines
            f.write(line)
            f.flush()
        self._items[key] = value


@dataclass
class Tally:
    """What a generation has done so far, for its progress line: items (from the cache or made now), tokens made
    now and the seconds they took, so the rate and ETA count only new work."""

    total: int
    done: int = 0
    cached: int = 0
    tokens: int = 0
    started: float = 0.0

    def rates(self, now: float) -> tuple[float, float, float | None]:
        """(items per second, tokens per second, seconds left) over the items made now; no ETA before one."""
        elapsed = max(now - self.started, 1e-9)
        made = self.done - self.cached
        per_s = made / elapsed
        left = (self.total - self.done) / per_s if made else None
        return per_s, self.tokens / elapsed, left


@dataclass(frozen=True)
class Job(Generic[T]):
    """One item to make: its cache key, and how to make it and read it back."""

    key: str
    make: Callable[[], T]


def run_items(jobs: Sequence[Job[T]], cache: ItemCache, encode: Callable[[T], dict], decode: Callable[[dict], T],
              tokens: Callable[[T], int], concurrency: int = 1, progress: Callable[[Tally], None] | None = None,
              should_stop: Callable[[], bool] = lambda: False) -> Iterator[tuple[int, T]]:
    """Yield (index, item) for every job, cached ones first and at once, the others as they finish, `concurrency`
    at a time (threads: an endpoint answers requests in parallel; a local model is given 1). Each made item is in
    the cache before it is yielded. When should_stop() turns true, no new item starts; the ones under way finish and
    are kept; then Cancelled is raised. An exception from make() (a server that is down) stops the generation the
    same way and is raised after the items under way are kept."""
    tally = Tally(total=len(jobs), started=time.monotonic())
    todo: list[int] = []
    for index, job in enumerate(jobs):
        value = cache.get(job.key)
        try:
            item = decode(value) if value is not None else None
        except (ValueError, KeyError, TypeError):
            item = None  # an entry of another version: made again
        if item is None:
            todo.append(index)
            continue
        tally.done += 1
        tally.cached += 1
        yield index, item
    tally.started = time.monotonic()
    if progress:
        progress(tally)
    failure: BaseException | None = None
    with _pool(max(1, concurrency)) as pool:
        pending: dict[Future, int] = {}
        queue = iter(todo)
        while True:
            while failure is None and len(pending) < max(1, concurrency) and not should_stop():
                index = next(queue, None)
                if index is None:
                    break
                pending[pool.submit(jobs[index].make)] = index
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                index = pending.pop(future)
                try:
                    item = future.result()
                except Exception as exc:  # noqa: BLE001 - raised below, once the items under way are kept
                    failure = failure or exc
                    continue
                cache.put(jobs[index].key, encode(item))
                tally.done += 1
                tally.tokens += tokens(item)
                if progress:
                    progress(tally)
                yield index, item
    if failure is not None:
        raise failure
    if tally.done < tally.total:
        raise Cancelled()


@contextmanager
def _pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="generate")
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
