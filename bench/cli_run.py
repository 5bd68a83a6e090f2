"""A researcher's CLI session on a 20,000-text labelled corpus, each step against a plain `SentenceTransformer.encode`
of the corpus's texts measured in the same script: `evaluate` (the reference), a 320-triplet `train` (its phases from
the run's own timings: the rest is the overhead of worker start, loading and saving), `layers --compare` on the run,
then two `quick` points, then the same `train` with another seed (so nothing of it is cached) while `python -m core
serve` keeps a warm worker (the session a researcher would run with it); before all of it, a `quick` point on the
demo corpus in a fresh home (caches and workers cold). Every command runs as a user types it, in its own process;
wall times include Python's start and imports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, SEED, Options, data_file, header, line, load_minilm, load_note

TEXTS = 20_000
QUICK_TEXTS = 2_000


def _corpus(folder: Path, n: int) -> tuple[Path, list[str]]:
    """A seeded sample of n SST-2 training rows as the train split and SST-2's 872 validation rows as the test."""
    import pandas as pd

    frame = pd.read_csv(data_file("sst2.csv"))
    train = frame[frame["split"] == "train"].sample(n=n, random_state=SEED)
    test = frame[frame["split"] == "validation"].assign(split="test")
    corpus = pd.concat([train, test], ignore_index=True)[["text", "label", "split"]]
    path = folder / "corpus.csv"
    corpus.to_csv(path, index=False)
    return path, corpus["text"].astype(str).tolist()


def _cli(*args: str, home: str | None = None) -> tuple[float, dict, str]:
    """(wall seconds, the --json output, the load average as it ended) of `python -m core ARGS --json`."""
    env = {**os.environ, **({"CONTRASTLAB_HOME": home} if home else {})}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "core", *args, "--json"], cwd=REPO, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"`python -m core {' '.join(args)}` exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout), load_note()


def _plain_encode(texts: list[str]) -> tuple[float, str]:
    """Seconds of `SentenceTransformer.encode` over the texts (the model loaded first, not counted)."""
    model = load_minilm()
    model.encode(texts[:64])  # first-call costs out of the timing, as the CLI's own warm-up does
    t0 = time.perf_counter()
    model.encode(texts, batch_size=32)
    return time.perf_counter() - t0, load_note()


def _stop_standbys(home: str) -> None:
    from core.jobs import standby
    from core.runs.store import RunStore

    standby.stop_all(RunStore(Path(home)))


def _with_serve(home: str, *args: str) -> tuple[float, dict, str]:
    """`_cli(*args)` while `python -m core serve` keeps a warm worker for the home (started, and ready, first)."""
    from core.jobs import standby
    from core.runs.store import RunStore

    store = RunStore(Path(home))
    serve = subprocess.Popen([sys.executable, "-m", "core", "serve"], cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not standby.waiting(store):
            if time.monotonic() > deadline or serve.poll() is not None:
                raise RuntimeError("`python -m core serve` gave no ready worker within 300 s")
            time.sleep(0.2)
        time.sleep(2)  # the worker's import burst over, as between a user's commands
        return _cli(*args)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)


def _train_line(label: str, train: tuple[float, dict, str]) -> dict:
    """Print a train call's wall time against its phases (the rest is the overhead); its phases."""
    t = train[1]["timings"]
    phases = {key: t.get(key, 0.0) for key in ("evaluate_before_s", "examples_s", "train_s", "evaluate_after_s")}
    line(label, f"wall {train[0]:.1f} s = " + " + ".join(
        f"{k.removesuffix('_s').replace('_', ' ')} {v:.1f}" for k, v in phases.items())
        + f" + overhead {train[0] - sum(phases.values()):.1f} s (of it loading {t.get('load_s', 0.0):.1f}, saving "
        f"{t.get('save_s', 0.0):.1f} s; the rest is the processes' start)  ({train[2]})")
    return phases


def run(opts: Options) -> None:
    from core.data.corpus import demo_corpus_path

    n = QUICK_TEXTS if opts.quick else TEXTS
    home = os.environ["CONTRASTLAB_HOME"]
    with tempfile.TemporaryDirectory(prefix="bench-cli-run-") as tmp:
        cold_home = str(Path(tmp) / "cold-home")
        try:
            demo = _cli("quick", str(demo_corpus_path()), "--margin", "0.5", home=cold_home)
        finally:
            _stop_standbys(cold_home)
        corpus, texts = _corpus(Path(tmp), n)
        plain, plain_load = _plain_encode(texts)
        evaluate = _cli("evaluate", str(corpus))
        train = _cli("train", str(corpus), "--recipe", "triplet", "--examples", "320")
        layers = _cli("layers", str(corpus), "--compare", train[1]["run_id"])
        try:
            first = _cli("quick", str(corpus), "--margin", "0.3")
            second = _cli("quick", str(corpus), "--margin", "0.7")
        finally:
            _stop_standbys(home)
        served = _with_serve(home, "train", str(corpus), "--recipe", "triplet", "--examples", "320", "--seed", "1")

    header("cli_run: a CLI session on a labelled corpus against a plain SentenceTransformer.encode of its texts",
           f"SST-2, {n:,} training texts + 872 test texts, all-MiniLM-L6-v2, one process per command")
    line(f"plain encode of {len(texts):,} texts", f"{plain:.1f} s  ({plain_load})")
    line("quick on the demo corpus, cold home", f"{demo[0]:.1f} s  ({demo[2]})")
    line("evaluate (reference)", f"{evaluate[0]:.1f} s = {evaluate[0] / plain:.2f}x plain  ({evaluate[2]})")
    phases = _train_line("train 320 triplets", train)
    line("after-evaluation / plain encode", f"{phases['evaluate_after_s'] / plain:.2f}x")
    line("layers --compare RUN", f"{layers[0]:.1f} s  ({layers[2]})")
    for name, point in (("quick, first point", first), ("quick, second point", second)):
        timings = point[1].get("timings") or {}
        line(name, f"{point[0]:.1f} s = {point[0] / plain:.2f}x plain (frozen states "
             f"{timings.get('frozen_states_s', 0.0):.1f}, train {timings.get('train_s', 0.0):.1f}, after "
             f"{timings.get('evaluate_after_s', 0.0):.1f} s)  ({point[2]})")
    _train_line("the same with seed 1, `serve` running", served)
