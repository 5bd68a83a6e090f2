"""Shared helpers for the benchmarks: seeds, data paths, interleaved timing, printing.

Every timing is taken against a baseline measured in the same process, right next to ours: the two
arms alternate (A B B A A B ...) and the median of each is reported, so load from other processes
hits both arms alike. Figures are printed as ratios; nothing here is hard-coded or tuned.
"""

from __future__ import annotations

import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Read-only shared data; never copied into the repo. CONTRASTLAB_DATA overrides the location.
DATA = Path(os.environ.get("CONTRASTLAB_DATA") or REPO.parent / "shared" / "data")
SEED = 0


@dataclass(frozen=True)
class Options:
    quick: bool = False
    device: str = "cpu"  # the benchmarks compare CPU figures; `--device cuda` measures a GPU (bench throughput)


def data_file(name: str) -> Path:
    path = DATA / name
    if not path.is_file():
        raise SystemExit(f"bench: data file {path} not found (set CONTRASTLAB_DATA to the shared data folder)")
    return path


def set_seeds(seed: int = SEED) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def quiet_libraries() -> None:
    """Offline, no progress bars or warnings from HF libraries on the benchmark's stdout."""
    from core.models.loading import setup_offline

    setup_offline()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import datasets
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def load_minilm(device: str = "cpu"):
    """The packaged all-MiniLM-L6-v2, on CPU unless a benchmark is asked to measure a GPU."""
    from core.models.loading import load_model

    return load_model(None, device=device)


def sst2_texts(n: int, seed: int = SEED) -> tuple[list[str], list[int]]:
    """n SST-2 texts and labels: all validation rows first (up to n), then a seeded sample of train rows."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(data_file("sst2.csv"))
    val = df[df["split"] == "validation"]
    train = df[df["split"] == "train"]
    val = val.iloc[: min(n, len(val))]
    rest = n - len(val)
    pick = np.sort(np.random.default_rng(seed).choice(len(train), size=rest, replace=False))
    rows = pd.concat([val, train.iloc[pick]])
    return rows["text"].astype(str).tolist(), rows["label"].astype(int).tolist()


def interleaved(arms: dict[str, Callable[[], object]], repeats: int, warmup: dict[str, Callable[[], object]] | None = None,
                budget_s: float | None = None) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Median seconds of each arm, and every timing in run order; arms alternate A B, B A, A B, ... so
    drift in machine load hits both alike.

    ``warmup`` callables (e.g. the same work on a small slice) run once, untimed, before the first round:
    lazy imports, allocator, thread pools. With ``budget_s``, no further round starts when it would
    likely end past the budget (at least one round always runs), so a loaded machine cannot stretch a
    run forever.
    """
    names = list(arms)
    for fn in (warmup or {}).values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in names}
    start = time.perf_counter()
    for r in range(repeats):
        t_round = time.perf_counter()
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            t0 = time.perf_counter()
            arms[name]()
            times[name].append(time.perf_counter() - t0)
        now = time.perf_counter()
        if budget_s is not None and (now - start) + (now - t_round) > budget_s:
            break
    return {name: statistics.median(ts) for name, ts in times.items()}, times


def paired(arms: dict[str, Callable[[object], object]], chunks: list, repeats: int,
           budget_s: float | None = None, warmup: object = None) -> tuple[dict[str, float], dict[str, list[float]], dict[str, list]]:
    """Fine-grained interleaving: every chunk of work is done by each arm in turn (A B, then B A on the
    next chunk), so a burst of load from other processes lands on both arms within a second of each other.

    Returns the median over repeats of each arm's total seconds, every repeat's total per arm, and each
    arm's outputs (one per chunk) from the last repeat. Each arm first runs ``warmup`` (default: the first
    chunk) once, untimed. With ``budget_s``, no further repeat starts when it would likely end
    past the budget (at least one always runs).
    """
    names = list(arms)
    for name in names:
        arms[name](chunks[0] if warmup is None else warmup)
    totals: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, list] = {}
    start = time.perf_counter()
    for _ in range(repeats):
        t_rep = time.perf_counter()
        spent = dict.fromkeys(names, 0.0)
        outs: dict[str, list] = {name: [] for name in names}
        for i, chunk in enumerate(chunks):
            for name in (names if i % 2 == 0 else names[::-1]):
                t0 = time.perf_counter()
                outs[name].append(arms[name](chunk))
                spent[name] += time.perf_counter() - t0
        for name in names:
            totals[name].append(spent[name])
        outputs = outs
        now = time.perf_counter()
        if budget_s is not None and (now - start) + (now - t_rep) > budget_s:
            break
    return {name: statistics.median(ts) for name, ts in totals.items()}, totals, outputs


def runs_note(times: dict[str, list[float]], unit: float = 1.0, fmt: str = "{:.1f}") -> str:
    """Every timing in run order, per arm, e.g. 'ours 9.1, 9.4; baseline 63.0, 64.2'."""
    return "; ".join(f"{name} " + ", ".join(fmt.format(t * unit) for t in ts) for name, ts in times.items())


def load_note() -> str:
    """The 1-minute load average against the core count, printed with timings so noise can be judged."""
    try:
        return f"load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:
        return "load avg unknown"


def header(title: str, what: str) -> None:
    print(f"== {title} ==")
    print(f"   {what}")


def line(label: str, value: str) -> None:
    print(f"   {label:<34} {value}")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def recorded(run) -> dict:
    """What a finished run recorded, flat: its evaluations before and after and its summary (examples, steps,
    timings, train_loss, ...), and the run itself."""
    return {"run": run, "before": run.before, "after": run.metrics_after, **(run.progress.get("summary") or {})}


def reproduce(name: str, quick: bool) -> tuple[dict, dict[str, dict]]:
    """A reproduction (core.reproduce) run in this process into the benchmark's home, as `python -m core reproduce
    NAME --data DATA` runs it: (its result: name, rows, runs; each arm's run as `recorded`, by label)."""
    from core.jobs.worker import execute
    from core.reproduce.job import reproduction_config
    from core.runs.store import RunStore

    store = RunStore()
    run_id = store.create("reproduce", reproduction_config(name, DATA, quick, "all-MiniLM-L6-v2"))
    execute(store, run_id)
    run = store.get(run_id)
    if run.status != "done":
        raise SystemExit(f"bench: the {name} reproduction ended {run.status}: {run.error}")
    return run.metrics_after, {label: recorded(store.get(i)) for label, i in run.metrics_after["runs"].items()}


def train_arms(arms: list, by: str | None = None) -> dict[str, dict]:
    """Each arm (core.reproduce.experiment.Arm) trained and evaluated as a run in this process
    (core.reproduce.job.run_arms), `recorded`, keyed by its label or, with `by`, by that setting of its config."""
    from core.reproduce.job import run_arms
    from core.runs.store import RunStore

    store = RunStore()
    outcomes = run_arms(store, None, arms)
    return {arm.config[by] if by else arm.label: recorded(store.get(outcomes[arm.label].run_id)) for arm in arms}


# ---------------------------------------------------------------- the real app in headless Chromium

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PAGE_TIMEOUT_MS = 600_000
START_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@contextmanager
def serve_app(log: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """The app as `make run` serves it (`streamlit run app.py`, its flags, `.streamlit/config.toml` from the repo
    root) on a free port, with this process's environment (CONTRASTLAB_HOME); yields (process, url). Always
    stopped afterwards, with the pre-warmed workers it left waiting in the run store."""
    from core.jobs import standby
    from core.runs.store import RunStore

    if not CHROMIUM.exists():
        raise SystemExit(f"bench: {CHROMIUM} is missing (apt-get install chromium)")
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "localhost", "--server.port",
           str(port), "--server.headless", "true"]  # the Makefile's `run` line
    with log.open("a") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://localhost:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start:\n{log.read_text()[-2000:]}") from None
                time.sleep(0.3)
        yield proc, url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        standby.stop_all(RunStore())


@contextmanager
def chromium() -> Iterator[object]:
    """Headless Chromium (playwright's Browser), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser, url: str):
    """A tab on the app in its own context, the app's first script run finished."""
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(url)
    page.get_by_role("heading", name="ContrastLab").wait_for()
    wait_idle(page)
    return page


def wait_idle(page) -> None:
    """Until the script run finished: Streamlit shows its status widget only while one is going."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=PAGE_TIMEOUT_MS)


def open_page(page, name: str, plot: bool = True) -> float:
    """Seconds from clicking a page in the sidebar until it finished drawing (its first plot, with `plot`)."""
    t0 = time.monotonic()
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name=name, exact=True).click()
    page.get_by_role("heading", name=name, exact=True).wait_for(timeout=PAGE_TIMEOUT_MS)
    if plot:
        page.locator('[data-testid="stMain"] .js-plotly-plot').first.wait_for(timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)
    return time.monotonic() - t0


def quick_point(page, margin: str) -> tuple[float, str]:
    """On the Trade-off page: seconds from pressing the quick-train button to its point on the plot, and the run id."""
    page.get_by_text("mined triplets are active").wait_for(timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)
    page.get_by_role("button", name=f"Train quick model at margin {margin}").click()
    t0 = time.monotonic()
    done = page.get_by_text(re.compile(rf"margin {re.escape(margin)} is on the plot as"))
    done.wait_for(timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)
    return time.monotonic() - t0, re.search(r"on the plot as `?([\w-]+)", done.inner_text()).group(1)
