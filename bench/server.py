"""The server must not eat the machine (issue 13): the real app (`make run`'s command, the packaged all-MiniLM-L6-v2)
on TREC, driven in headless Chromium as a new user would, with the CPU it takes measured while it idles.

- Server CPU: the Streamlit process's own CPU time, and its child processes' other than the training worker (a
  waiting pre-warmed worker), as % of one core over a window: with no run (the baseline), during a triplet run
  started from the Train page with the tab open on its live progress (goal <= 2 %), and with the tab closed. The
  training worker's and Chromium's shares are printed beside them.
- Training step time with the app open vs closed: the same config run (a) from the Train page, tab open, and (b)
  through `python -m core train --config` with no server running; median seconds per optimiser step from the
  (step, elapsed) progress each worker records in the run store; at full size the arms alternate (open, closed,
  closed, open).
- The issue's reference figures re-measured along the same walk, each beside the issue's figure as its baseline:
  `python -m core evaluate` on TREC, a 1,000-triplet run (its wall time, and the ETA it showed at ~10 % of its
  steps against the time that was really left), the Layers page's first visit, a quick margin point, and
  `python -m core export`. --quick walks a TREC subset with smaller runs: not comparable with the issue's figures.
- What the app wrote inside the repository during the walk, and where its home folder is by default.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.common import (
    REPO,
    SEED,
    Options,
    chromium,
    data_file,
    header,
    line,
    load_note,
    new_page,
    open_page,
    quick_point,
    ratio,
    serve_app,
    wait_idle,
)

# Issue 13's walk on TREC (a 2-core machine at load 2-5, file watcher on): the baselines printed beside ours.
ISSUE = {"evaluate_s": 129.0, "run_s": 16.5 * 60, "run_eta_s": 8 * 60, "layers_s": 183.0, "quick_s": 235.0,
         "export_s": 91.0}
GOAL_PCT = 2.0  # of one core, for the server while a run trains with its page open
POLL_S = 0.5  # how often a followed run's progress is read from the store (its worker flushes every 0.25 s)
CPU_SAMPLE_S = 1.0
WAIT_S = 600.0


@dataclass(frozen=True)
class Sizes:
    """How big the walk is: full size re-measures the issue's figures; --quick only checks the benchmark works."""

    label: str
    window_s: float  # each CPU window
    train_rows: int | None  # a seeded sample of TREC's train and test rows; None: all of TREC
    test_rows: int | None
    examples: int  # the walk's triplet run (the issue's: 1,000), also the step-time config
    batch_size: int
    load_examples: int  # the run the CPU windows are taken during: long enough to outlast them, then cancelled
    load_epochs: int
    repeats: int  # open/closed pairs of the step-time comparison, the walk's run the first open one


FULL = Sizes("full size: all of TREC, a 1,000-triplet run at batch 32, 60 s CPU windows, two open/closed pairs",
             60.0, None, None, 1000, 32, 2000, 5, 2)
QUICK = Sizes("--quick: 1,500 train / 100 test TREC rows, a 192-triplet run at batch 16; not comparable with the "
              "issue's figures", 15.0, 1500, 100, 192, 16, 256, 10, 1)


# ---------------------------------------------------------------- CPU


def _cpu_s(proc: psutil.Process) -> float:
    """Seconds of CPU the process itself used (user + system; not its exited children's, which a parent collects)."""
    times = proc.cpu_times()
    return times.user + times.system


def cpu_shares(groups: dict[str, Callable[[], list[psutil.Process]]], seconds: float) -> dict[str, float]:
    """% of one core each group of processes used over `seconds`. Members are listed every CPU_SAMPLE_S, so a
    process started in the window counts from its start; one that exits loses at most its last sample's worth."""
    first: dict[tuple[str, int], float] = {}
    last: dict[tuple[str, int], float] = {}

    def sample(at_start: bool) -> None:
        for name, members in groups.items():
            for proc in members():
                try:
                    used = _cpu_s(proc)
                except psutil.NoSuchProcess:
                    continue
                first.setdefault((name, proc.pid), used if at_start else 0.0)
                last[(name, proc.pid)] = used

    t0 = time.monotonic()
    sample(True)
    while (left := t0 + seconds - time.monotonic()) > 0:
        time.sleep(min(CPU_SAMPLE_S, left))
        sample(False)
    wall = time.monotonic() - t0
    return {name: 100 * sum(last[k] - first[k] for k in last if k[0] == name) / wall for name in groups}


def _alive(pid: int | None) -> list[psutil.Process]:
    try:
        return [psutil.Process(pid)] if pid else []
    except psutil.NoSuchProcess:
        return []


def _tree(pid: int | None) -> list[psutil.Process]:
    """The process's descendants (none when it is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True) if pid else []
    except psutil.NoSuchProcess:
        return []


def process_groups(server_pid: int, worker_pid: int | None) -> dict[str, Callable[[], list[psutil.Process]]]:
    """The server; its other children (a waiting pre-warmed worker); the training worker; Chromium (this process's
    descendants named so)."""
    def others() -> list[psutil.Process]:
        skip = {worker_pid, *(p.pid for p in _tree(worker_pid))}
        return [p for p in _tree(server_pid) if p.pid not in skip]

    def browser() -> list[psutil.Process]:
        found = []
        for proc in _tree(os.getpid()):
            try:
                if "chrom" in proc.name().lower():
                    found.append(proc)
            except psutil.NoSuchProcess:
                continue
        return found

    return {"server": lambda: _alive(server_pid), "other children": others,
            "training worker": lambda: _alive(worker_pid), "Chromium": browser}


# ---------------------------------------------------------------- following a run


@dataclass
class Followed:
    """A finished run and its training progress as read every POLL_S: (wall clock, step, total, elapsed_s, eta_s)."""

    run: object  # core.runs.store.Run
    samples: list[tuple[float, int, int, float, float | None]]

    def step_times(self) -> list[float]:
        """Seconds per optimiser step between consecutive samples, from the worker's own clock (elapsed_s); the
        first sample, which holds the first step's set-up, is only the origin."""
        return [(e2 - e1) / (s2 - s1) for (_, s1, _, e1, _), (_, s2, _, e2, _) in zip(self.samples, self.samples[1:])]

    def eta_check(self) -> tuple[int, int, float, float, float]:
        """At the first sample at or past 10 % of the steps: (step, total, ETA shown, training time really left,
        run time really left). Training ends at the trainer's own train_s (started just before the first step)."""
        wall, step, total, elapsed, eta = next(s for s in self.samples if s[1] >= 0.1 * s[2] and s[4] is not None)
        train_s = self.run.progress["summary"]["timings"]["train_s"]
        return step, total, eta, train_s - elapsed, self.run.finished - wall


def follow(store, run_id: str) -> Followed:
    """Read the run's progress until it has ended; raises when it did not end done (its figures would be wrong)."""
    samples = []
    deadline = time.monotonic() + 3 * 3600
    while (run := store.get(run_id)).active:
        p = run.progress
        if p.get("phase") == "training" and p.get("step") and (not samples or p["step"] != samples[-1][1]):
            samples.append((time.time(), p["step"], p["total"], p["elapsed_s"], p.get("eta_s")))
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} is still {run.status} after 3 hours")
        time.sleep(POLL_S)
    if run.status != "done":
        raise RuntimeError(f"run {run_id} ended {run.status}: {run.error}")
    if len(samples) < 2:
        raise RuntimeError(f"run {run_id} trained too few steps to time them ({len(samples)} seen)")
    return Followed(run, samples)


def _new_run(store, before: set[str]) -> str:
    """The id of the run created since `before` was listed."""
    deadline = time.monotonic() + WAIT_S
    while not (new := [r.id for r in store.list(kind="train", with_losses=False) if r.id not in before]):
        if time.monotonic() > deadline:
            raise RuntimeError("no run was created")
        time.sleep(0.2)
    return new[0]


def _wait_training(store, run_id: str) -> None:
    """Until the run is in its training steps (evaluation before and mining done)."""
    deadline = time.monotonic() + WAIT_S
    while not ((run := store.get(run_id)).progress.get("phase") == "training" and run.progress.get("step")):
        if not run.active or time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} never reached its training steps ({run.status}: {run.error})")
        time.sleep(POLL_S)


def _wait_standby(store) -> None:
    """Until the app's pre-warmed worker has finished its imports, so its start-up is in no timing or CPU window."""
    from core.jobs import standby

    if standby.idle_s() <= 0:
        return
    deadline = time.monotonic() + WAIT_S
    while not any(standby.folder(store).glob("*.ready")):
        if time.monotonic() > deadline:
            raise RuntimeError("the app's pre-warmed worker never became ready")
        time.sleep(0.2)


# ---------------------------------------------------------------- the app and the CLI


def trec(home: Path, sizes: Sizes) -> Path:
    """TREC, or for --quick a seeded subset of its train and test rows written into the (temporary) home."""
    path = data_file("trec.csv")
    if sizes.train_rows is None:
        return path
    import pandas as pd

    df = pd.read_csv(path)
    parts = [df[df["split"] == split].sample(n, random_state=SEED)
             for split, n in (("train", sizes.train_rows), ("test", sizes.test_rows))]
    subset = home / "trec-quick.csv"
    pd.concat(parts).to_csv(subset, index=False)
    return subset


def load_corpus(page, path: Path) -> None:
    """Upload the file on the Corpus page; its columns (text, label, split) are detected."""
    open_page(page, "Corpus", plot=False)
    page.get_by_text("Upload a file").click()
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    page.get_by_role("heading", name=f"Validation report · {path.stem}").wait_for()
    wait_idle(page)


def start_training(page, store, settings: dict[str, int]) -> str:
    """On the Train page (triplet, its default recipe): fill in the settings, press Start training; the run's id."""
    open_page(page, "Train", plot=False)
    for label, value in settings.items():
        box = page.get_by_role("spinbutton", name=label, exact=True)
        box.fill(str(value))
        box.press("Enter")
        wait_idle(page)
    before = {r.id for r in store.list(kind="train", with_losses=False)}
    page.get_by_role("button", name="Start training").click()
    return _new_run(store, before)


def cli(*args: str) -> tuple[float, dict]:
    """`python -m core ARGS --json`: wall seconds and its JSON result; raises with its error line on failure."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "core", *args, "--json"], cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"python -m core {' '.join(args)} exited {done.returncode}: {done.stderr[-1000:]}")
    return time.monotonic() - t0, json.loads(done.stdout)


def cli_train(store, config: dict, home: Path) -> Followed:
    """The config through `python -m core train --config`, followed in the store as it trains."""
    path = home / "bench-config.json"
    path.write_text(json.dumps(config))
    before = {r.id for r in store.list(kind="train", with_losses=False)}
    proc = subprocess.Popen([sys.executable, "-m", "core", "train", "--config", str(path), "--json"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        followed = follow(store, _new_run(store, before))
    finally:
        _, err = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"python -m core train exited {proc.returncode}: {err[-1000:]}")
    return followed


def open_arm(store, corpus: Path, settings: dict[str, int], home: Path) -> Followed:
    """A run of the step-time config started from the Train page of a freshly served app, its tab left open."""
    with serve_app(home / "streamlit.log") as (_server, url), chromium() as browser:
        page = new_page(browser, url)
        load_corpus(page, corpus)
        return follow(store, start_training(page, store, settings))


# ---------------------------------------------------------------- the repository tree


def repo_files() -> dict[Path, int]:
    """Every file under the repository but .git and .venv, with its modification time."""
    found = {}
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not (Path(folder) == REPO and d in (".git", ".venv"))]
        for name in files:
            path = Path(folder, name)
            try:
                found[path] = path.stat().st_mtime_ns
            except FileNotFoundError:
                continue
    return found


def streamlit_options() -> str:
    """The settings in the repository's Streamlit config that decide what an idle server does."""
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    return ", ".join(f"{section}.{key} {config.get(section, {}).get(key, 'not set')}"
                     for section, key in (("server", "fileWatcherType"), ("runner", "postScriptGC")))


def default_home() -> Path:
    """Where the app keeps runs and caches when CONTRASTLAB_HOME is not set."""
    from core.storage import home

    saved = os.environ.pop("CONTRASTLAB_HOME", None)
    try:
        return home()
    finally:
        if saved is not None:
            os.environ["CONTRASTLAB_HOME"] = saved


# ---------------------------------------------------------------- the benchmark


def run(opts: Options) -> None:
    from core.jobs.sweep import cancel
    from core.runs.store import RunStore
    from core.storage import home as contrastlab_home

    os.environ.pop("CONTRASTLAB_MODEL", None)  # the packaged default model, as a user gets it
    sizes = QUICK if opts.quick else FULL
    home = contrastlab_home()
    store = RunStore()
    log = home / "streamlit.log"
    before_files = repo_files()
    corpus = trec(home, sizes)
    settings = {"Examples (N)": sizes.examples, "Batch size": sizes.batch_size}
    figures: dict[str, float] = {}
    cpu: dict[str, dict[str, float]] = {}

    figures["evaluate_s"], _ = cli("evaluate", str(corpus))  # cold caches, as the issue's first step
    with serve_app(log) as (server, url), chromium() as browser:
        page = new_page(browser, url)
        load_corpus(page, corpus)
        open_page(page, "Train", plot=False)
        _wait_standby(store)
        cpu[IDLE] = cpu_shares(process_groups(server.pid, None), sizes.window_s)

        walk = follow(store, start_training(page, store, settings))
        figures["run_s"] = walk.run.finished - walk.run.created
        wait_idle(page)
        _wait_standby(store)
        figures["layers_s"] = open_page(page, "Layers")
        open_page(page, "Trade-off")
        figures["quick_s"], _ = quick_point(page, "0.1")
        _wait_standby(store)
        figures["export_s"], _ = cli("export", walk.run.id, "--out", str(home / "bench-exports"))

        load_id = start_training(page, store, {**settings, "Examples (N)": sizes.load_examples,
                                               "Epochs": sizes.load_epochs})
        _wait_training(store, load_id)
        groups = process_groups(server.pid, store.get(load_id).pid)
        cpu[OPEN] = cpu_shares(groups, sizes.window_s)
        page.context.close()
        cpu[CLOSED] = cpu_shares(groups, sizes.window_s)
        still = store.get(load_id)
        if not (still.active and still.progress.get("phase") == "training"):
            raise RuntimeError(f"run {load_id} stopped training during the CPU windows ({still.status})")
        cancel(store, load_id)
        while store.get(load_id).active:
            time.sleep(POLL_S)

    arms: dict[str, list[Followed]] = {"open": [walk], "closed": []}
    order = [arm for r in range(sizes.repeats) for arm in (("open", "closed") if r % 2 == 0 else ("closed", "open"))]
    for arm in order[1:]:
        followed = (cli_train(store, walk.run.config, home) if arm == "closed"
                    else open_arm(store, corpus, settings, home))
        if followed.run.config != walk.run.config:
            raise RuntimeError(f"the {arm} arm trained another config than the walk's run")
        arms[arm].append(followed)
    written = sorted(p for p, mtime in repo_files().items() if before_files.get(p) != mtime)
    report(opts, sizes, cpu, arms, order, figures, log, written)


IDLE, OPEN, CLOSED = "no run, tab open (baseline)", "run training, tab open", "run training, tab closed"


def report(opts: Options, sizes: Sizes, cpu: dict[str, dict[str, float]], arms: dict[str, list[Followed]],
           order: list[str], figures: dict[str, float], log: Path, written: list[Path]) -> None:
    header("server", sizes.label)
    line("load", load_note())
    print(f"   CPU, % of one core over {sizes.window_s:.0f} s; server + its children but the training worker: goal "
          f"<= {GOAL_PCT:g} % while a run trains with its page open")
    columns = ["server + children", *next(iter(cpu.values()))]
    print(f"   {'':<28}" + "".join(f"{c:>18}" for c in columns))
    app = {state: shares["server"] + shares["other children"] for state, shares in cpu.items()}
    for state, shares in cpu.items():
        print(f"   {state:<28}" + "".join(f"{v:>17.1f}%" for v in (app[state], *shares.values())))
    for state in (OPEN, CLOSED):
        line(f"{state.removeprefix('run training, ')} / no run", ratio(app[state], app[IDLE]))
    line("'Inotify' lines in the server log", str(log.read_text(errors="replace").count("Inotify")))
    line(".streamlit/config.toml", streamlit_options())

    walk = arms["open"][0]
    config = walk.run.config
    medians = {arm: statistics.median(t for f in runs for t in f.step_times()) for arm, runs in arms.items()}
    print(f"   median optimiser step, {config['examples']:,} triplets, batch {config['batch_size']} (order: "
          f"{', '.join(order)}; open: started on the Train page, tab open; closed: the CLI, no server)")
    for arm, runs in arms.items():
        per_run = ", ".join(f"{statistics.median(f.step_times()):.2f}" for f in runs)
        line(f"  app {arm}", f"{medians[arm]:.2f} s/step (each run: {per_run})")
    line("  open / closed", ratio(medians["open"], medians["closed"]))

    print("   reference figures: ours; the issue's (2 cores at load 2-5, file watcher on); ours / issue's"
          + (" -- quick sizes, NOT comparable" if opts.quick else ""))
    rows = {"evaluate_s": "reference evaluation (CLI)", "run_s": f"{config['examples']:,}-triplet run (page)",
            "layers_s": "Layers page, first visit", "quick_s": "quick margin point", "export_s": "export (CLI)"}
    for key, label in rows.items():
        line(f"  {label}", f"{figures[key]:.0f} s; {ISSUE[key]:.0f} s; {ratio(figures[key], ISSUE[key])}")
    step, total, eta, train_left, run_left = walk.eta_check()
    line(f"  ETA shown at step {step}/{total}", f"{eta:.0f} s; training left {train_left:.0f} s (ETA / real "
         f"{ratio(eta, train_left)}); run left {run_left:.0f} s (ETA / real {ratio(eta, run_left)})")
    line("  the issue's ETA / real run", f"{ISSUE['run_eta_s']:.0f} s / {ISSUE['run_s']:.0f} s")
    line("  the same run from the CLI, wall", ", ".join(f"{f.run.finished - f.run.created:.0f} s"
                                                     for f in arms["closed"]))

    home = default_home()
    where = "INSIDE" if home.resolve().is_relative_to(REPO) else "outside"
    line("default home (no CONTRASTLAB_HOME)", f"{home} ({where} the repository)")
    folders = Counter(p.relative_to(REPO).parts[0] for p in written)
    line("written inside the repository", ", ".join(f"{name} ({n} files)" for name, n in folders.most_common())
         + " (by any process: on a shared machine, others' edits too)" if folders else "nothing")
