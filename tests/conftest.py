"""Shared fixtures: an isolated ContrastLab home and a tiny random BERT (no downloads)."""

import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

# The tiny test models are too small to gain from threads, and on a busy 2-core machine torch's spinning
# threads slow them down several-fold; one thread also applies to the worker processes tests start.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# No pre-warmed workers (core.jobs.standby) outliving a test; tests/test_standby.py turns them on where tested.
os.environ["CONTRASTLAB_STANDBY_S"] = "0"
# A home for what session fixtures write before a test's own home is set (load_model remembers a fingerprint):
# never the repository's .contrastlab.
os.environ["CONTRASTLAB_HOME"] = _SESSION_HOME = tempfile.mkdtemp(prefix="contrastlab-session-")
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)

from hypothesis import HealthCheck, settings  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from core import collector  # noqa: E402

# Property tests check what a function returns, not how fast: on 2 busy cores hypothesis's 200 ms deadline failed a
# one-character example that took 252 ms once (0.3 ms when rerun). Every @given test runs without a deadline.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
APP = Path(__file__).resolve().parents[1] / "app.py"
APP_TIMEOUT_S = 90  # the first run imports torch; a synchronous training run adds a few seconds


# `make test` runs the suite on two workers, a file at a time each (pytest-xdist, --dist loadfile), taking files in
# collection order: these files take half a minute or more each, so they go first, longest first, while the other
# worker goes through the short ones, instead of ending the run with one worker busy and the other idle. Names or
# name prefixes; the first that matches a file gives its place. test_ddp.py and test_ray_sweep.py, which start many
# processes each, are not the first two, so that they do not start together.
LONG_FILES = ("test_ddp.py", "test_browser.py", "test_ray_sweep.py", "test_projection.py",
              "test_train.py", "test_reliability_runs.py", "test_browser_views.py", "test_standby_orphan.py",
              "test_reliability_caches.py", "test_browser", "test_selection.py", "test_standby")


def _long_rank(name: str) -> int:
    return next((i for i, prefix in enumerate(LONG_FILES) if name.startswith(prefix)), len(LONG_FILES))


def pytest_configure(config) -> None:
    # pytest-xdist (3.x) by default hands out the files with the most tests first (--loadscope-reorder), which put
    # the long files above, most of them a few tests each, last: keep the order given here (--no-loadscope-reorder).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_finish(session) -> None:
    # Collection imported the training stack (about 600,000 objects the collector tracks), and every full
    # collection after it, two after each in-process training run, walked them all: 114 s of the two workers' wall
    # in one suite run. Frozen, they are skipped (core.collector).
    collector.freeze_imports()


def pytest_collection_modifyitems(items: list) -> None:
    items.sort(key=lambda item: _long_rank(item.path.name))  # stable: each file keeps its order


@pytest.fixture(autouse=True)
def contrastlab_home(tmp_path_factory, monkeypatch) -> Path:
    """Caches and run databases go to a temp dir, never the user's ~/.contrastlab."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("CONTRASTLAB_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    # Imported here, not at the top: `make test`'s controlling process loads this file before it starts its two
    # workers and runs no test itself, and torch with sentence-transformers took it 7 s of that start.
    from tests.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    from core.models.loading import load_model

    return load_model(str(tiny_model_dir), device="cpu")


def interruptible() -> None:
    """A Popen preexec_fn for a CLI a test stops with Ctrl-C (SIGINT): a shell starting a job in the background
    (`cmd &` in a script, as CI runners may) hands it SIGINT ignored, Python then installs no Ctrl-C handler and the
    signal does nothing. The child gets the default disposition a terminal user's process has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def shared_data(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture
def app(monkeypatch, tiny_model_dir) -> AppTest:
    """The whole app (router, state, sidebar) on the tiny model, not yet run; pages via at.switch_page(...)."""
    monkeypatch.setenv("CONTRASTLAB_MODEL", str(tiny_model_dir))
    return AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT_S)


def paste_table(app: AppTest, text: str) -> AppTest:
    """Run the app, open the Corpus page and paste `text` as the corpus table."""
    app.run()
    at = app.switch_page("app_pages/1_Corpus.py").run()
    at.radio(key="corpus_source").set_value("Paste a table").run()
    return at.text_area(key="corpus_paste").set_value(text).run()


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def no_errors(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def train_tiny_run(home: Path, model_dir: Path, **settings) -> str:
    """A finished train run on the demo corpus with the tiny model (32 examples, one epoch), executed in this
    process into `home`; `settings` override the TrainConfig fields. For pages that need a run to show."""
    from core.data.corpus import demo_corpus_path
    from core.training.config import TrainConfig

    cfg = TrainConfig(**{"corpus": str(demo_corpus_path()), "model": str(model_dir), "examples": 32,
                         "batch_size": 16, "epochs": 1, "threshold": 0.0, "device": "cpu", **settings})
    (run_id,) = train_runs(home, [cfg.to_dict()])
    return run_id


def tiny_runs_home(tmp_path_factory, model_dir: Path, *settings: dict) -> tuple[Path, list[str]]:
    """A home of its own holding one finished tiny run (train_tiny_run) per `settings`, for a module's tests to share
    through a module fixture: training is where such tests spend their time."""
    home = tmp_path_factory.mktemp("runs-home")
    return home, [train_tiny_run(home, model_dir, **s) for s in settings]


def train_runs(home: Path, configs: list[dict], corpus_name: str | None = None) -> list[str]:
    """Each train config run to the end in this process into `home`'s run store; their ids, in order."""
    from core.jobs import worker
    from core.runs.store import RunStore

    ids = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTRASTLAB_HOME", str(home))
        store = RunStore(home)
        for config in configs:
            run_id = store.create("train", config, corpus_name=corpus_name)
            worker.execute(store, run_id)
            run = store.get(run_id)
            assert run.status == "done", run.error
            ids.append(run_id)
    return ids
