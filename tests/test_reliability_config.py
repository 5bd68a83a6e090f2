"""Issue 12, items 2 and 3: every training setting is refused before a worker starts (CLI, config files, sweeps,
the Train page) with one line and no run row; export, a busy, full or corrupt runs database answer with one line
too. Property tests feed arbitrary settings and config files to TrainConfig."""

from __future__ import annotations

import errno
import json
import math
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.runs.store
from core.cli import main
from core.errors import UserError, shorten
from core.jobs.sweep import sweep_config
from core.models.loading import layer_count, model_type, supports_top_layers
from core.runs.export import export_run
from core.runs.store import RunStore
from core.storage import home
from core.training.config import GENERAL_PARAMS, TrainConfig
from core.training.recipes import RECIPES, recipe_params
from tests.conftest import button

CORPUS = "text,label\n" + "".join(f"the {w} game number {i} of the day,{w}\n"
                                  for i in range(20) for w in ("sport", "film", "news"))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "c.csv"
    path.write_text(CORPUS, encoding="utf-8")
    return path


def no_runs() -> bool:
    db = home() / "runs.sqlite"
    return not db.exists() or RunStore().list(with_losses=False) == []


def refused(capsys, argv: list[str], *words: str) -> str:
    """The CLI exits 2 with one 'error:' line naming `words` (after any warnings the corpus gives, e.g. its few test
    texts), and no run row was created."""
    code = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2, lines
    assert all(line.startswith("warning: ") for line in lines[:-1]), lines
    err = lines[-1]
    assert err.startswith("error: "), err
    for word in words:
        assert word in err, err
    assert no_runs()
    return err


# --- item 2: every setting checked before a worker starts --------------------------------------------------

@pytest.mark.parametrize("flags,words", [
    (["--margin", "inf"], ["margin"]),
    (["--epochs", "inf"], ["epochs"]),
    (["--lr", "inf"], ["lr"]),
    (["--lr", "nan"], ["lr"]),
    (["--seed", "-1"], ["seed"]),
    (["--distance", "manhattan"], ["distance"]),
    (["--mine-k", "0"], ["mine_k"]),
    (["--threshold", "2"], ["threshold"]),
    (["--freeze-layers", "3"], ["freeze_layers", "2"]),  # the tiny model has 2 layers
    (["--freeze-layers", "99"], ["freeze_layers"]),
    (["--device", "tpu"], ["device"]),
    (["--device", "cuda:99"], ["cuda:99"]),
    pytest.param(["--device", "mps"], ["mps"], marks=pytest.mark.skipif(
        torch.backends.mps.is_available(), reason="this machine has MPS")),
    pytest.param(["--device", "cuda"], ["cuda"], marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason="this machine has CUDA")),
])
def test_bad_setting_exits_2_before_a_run_row(flags, words, corpus, tiny_model_dir, capsys):
    refused(capsys, ["train", str(corpus), "--model", str(tiny_model_dir), "--max-steps", "1", *flags], *words)


@pytest.mark.parametrize("text,words", [
    ('examples: "many"', ["examples"]),
    ("epochs: [1]", ["epochs"]),
    ("lr: {}", ["lr"]),
    ("seed: true", ["seed"]),
    ("examples: 1" + "0" * 400, ["examples"]),  # an int too large for a float
    ("1: 2", ["key"]),  # a key that is not a setting name
    ("[1, 2]: 3", ["line 3"]),  # a YAML error spread over several lines
    ("freeze_layers: 5", ["freeze_layers"]),
    ("device: tpu", ["device"]),
])
def test_bad_config_file_exits_2(text, words, corpus, tiny_model_dir, tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(f"corpus: {corpus}\nmodel: {tiny_model_dir}\n{text}\n", encoding="utf-8")
    refused(capsys, ["train", "--config", str(path)], str(path), *words)


@pytest.mark.parametrize("name,text,words", [
    ("twice.yaml", "lr: 0.1\nlr: 0.2\n", ["'lr' is given twice", "line 4"]),
    ("nested.yaml", "report_to: none\nreport_to: mlflow\n", ["'report_to' is given twice"]),
    ("twice.json", None, ["'lr' is given twice"]),
])
def test_a_config_that_gives_a_key_twice_exits_2(name, text, words, corpus, tiny_model_dir, tmp_path, capsys):
    """A key given twice kept its last value in silence (issue 33); a YAML merge key (<<) may still be overridden."""
    path = tmp_path / name
    if text is None:
        path.write_text(f'{{"corpus": "{corpus}", "model": "{tiny_model_dir}", "lr": 0.1, "lr": 0.2}}')
    else:
        path.write_text(f"corpus: {corpus}\nmodel: {tiny_model_dir}\n{text}", encoding="utf-8")
    refused(capsys, ["train", "--config", str(path)], str(path), *words)


def test_a_yaml_merge_key_may_be_overridden(corpus, tiny_model_dir, tmp_path):
    path = tmp_path / "merged.yaml"
    path.write_text(f"<<: {{lr: 0.1, seed: 3}}\ncorpus: {corpus}\nmodel: {tiny_model_dir}\nlr: 0.2\n")
    config = TrainConfig.from_file(path)
    assert config.lr == 0.2 and config.seed == 3


@pytest.mark.parametrize("name,text", [("list.yaml", "- a\n- b\n"), ("empty.yaml", ""), ("list.json", "[1]"),
                                       ("deep.json", "[" * 100_000 + "]" * 100_000), ("nan.json", '{"lr": NaN}')])
def test_config_that_is_not_a_mapping_of_settings_exits_2(name, text, tmp_path, capsys):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    refused(capsys, ["train", "--config", str(path)], str(path))


def test_sweep_refuses_a_bad_base_before_its_run_row(corpus, tiny_model_dir, capsys):
    base = {"corpus": str(corpus), "model": str(tiny_model_dir)}
    with pytest.raises(UserError, match="freeze_layers"):
        sweep_config({**base, "freeze_layers": 3}, ["triplet"], [0.1])
    with pytest.raises(UserError, match="device"):
        sweep_config({**base, "device": "tpu"}, ["triplet", "contrastive"], [0.1])
    with pytest.raises(UserError, match="margin"):
        sweep_config(base, ["triplet"], [math.inf])
    refused(capsys, ["sweep", str(corpus), "--model", str(tiny_model_dir), "--margins", "0.1,inf"], "margin")


def test_layer_count_reads_the_config_without_loading_weights(tiny_model_dir, tmp_path):
    assert layer_count(str(tiny_model_dir)) == 2
    nested = tmp_path / "nested"  # a model whose transformer lives in a subfolder (0_Transformer/)
    shutil.copytree(tiny_model_dir, nested / "0_Transformer")
    (nested / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "0_Transformer",
                                                      "type": "sentence_transformers.models.Transformer"}]))
    (nested / "0_Transformer" / "model.safetensors").unlink()  # weights are never read
    assert layer_count(str(nested)) == 2
    assert TrainConfig(corpus="x.csv", model=str(tiny_model_dir), freeze_layers=2).freeze_layers == 2


def test_layer_count_and_type_of_configs_that_name_them_otherwise_or_break(tiny_model_dir, tmp_path):
    """config.json is read as JSON; a count under another name (DistilBERT's n_layers) goes through transformers'
    own reading, and an unreadable config is one clear error."""
    distil = tmp_path / "distil"
    distil.mkdir()
    (distil / "config.json").write_text(json.dumps({"model_type": "distilbert", "n_layers": 3, "dim": 48,
                                                    "n_heads": 2, "hidden_dim": 96, "vocab_size": 30}))
    assert layer_count(str(distil)) == 3
    assert model_type(str(distil)) == "distilbert" and not supports_top_layers(model_type(str(distil)))
    assert model_type(str(tiny_model_dir)) == "bert" and supports_top_layers("bert")
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    for text in ("{not json", "[1, 2]", ""):
        (broken / "config.json").write_text(text)
        with pytest.raises(UserError, match="Could not read the configuration"):
            layer_count(str(broken))
    (broken / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": True}))
    assert layer_count(str(broken)) is None  # not a count


def test_train_page_refuses_freezing_more_layers_than_the_model_has(app, monkeypatch):
    import core.jobs.launch

    monkeypatch.setattr(core.jobs.launch, "start", lambda store, run_id: 0)
    app.run()
    at = app.switch_page("app_pages/2_Train.py").run()
    at.number_input(key="train:freeze_layers").set_value(3).run()
    button(at, "Start training").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert errors and all("freeze_layers" in e and len(e.splitlines()) == 1 for e in errors), errors
    assert no_runs()


# --- property tests -------------------------------------------------------------------------------------------

KNOWN = sorted({*GENERAL_PARAMS, *recipe_params()})
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats() | st.text(max_size=20) | st.sampled_from(["inf", "-inf", "nan", "1e400", "cuda", "mps", "cpu",
                                                            *RECIPES]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)
KEYS = st.sampled_from(KNOWN) | st.text(max_size=12)
# Values near the valid ones (small numbers, bounds, choices), so many configs pass and the cross-setting checks
# (freeze_layers against the model's layers, the recipe's own settings) run too.
NEAR = (st.integers(-2, 120) | st.floats(-2.0, 10.0) | st.sampled_from([0, 1, 1.0, 0.5, -1.0, 1e-5, 100, "1", "0.1"])
        | st.sampled_from(sorted({str(c) for p in GENERAL_PARAMS.values() for c in p.choices}
                                 | {str(c) for _n, owners in recipe_params().items() for _r, q in owners
                                    for c in q.choices})))


def one_line_or_valid(data: object) -> None:
    try:
        cfg = TrainConfig.from_dict(data)
    except UserError as exc:
        assert str(exc) and len(str(exc).splitlines()) == 1, str(exc)
        return
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg  # a valid config survives its own round trip
    for value in cfg.to_dict().values():
        assert not isinstance(value, float) or math.isfinite(value)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, JSON_VALUES | NEAR, max_size=6), st.booleans(), st.sampled_from([None, *RECIPES]))
def test_arbitrary_config_dicts_give_a_config_or_one_user_error(data, with_corpus, recipe):
    if with_corpus:
        data["corpus"] = "x.csv"
    if recipe is not None:
        data["recipe"] = recipe
    one_line_or_valid(data)


@st.composite
def near_valid_configs(draw) -> dict:
    """A recipe's config with a few of its settings (general or its own) set to near-valid or arbitrary values."""
    recipe = RECIPES[draw(st.sampled_from(sorted(RECIPES)))]
    names = sorted({*GENERAL_PARAMS, *(p.name for p in recipe.params)} - {"corpus", "recipe"})
    changes = draw(st.dictionaries(st.sampled_from(names), NEAR | NEAR | JSON_VALUES, max_size=4))
    return {"corpus": "x.csv", "recipe": recipe.name, **changes}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid_configs())
def test_near_valid_config_dicts_give_a_config_or_one_user_error(data):
    one_line_or_valid(data)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers() | st.none() | st.booleans() | st.floats(), JSON_VALUES, min_size=1, max_size=3)
       | JSON_VALUES)
def test_arbitrary_config_objects_give_a_config_or_one_user_error(data):
    one_line_or_valid(data)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode), st.sampled_from([".yaml", ".json", ".yml"]))
def test_arbitrary_config_files_give_a_config_or_one_user_error(body, suffix):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"run{suffix}"
        path.write_bytes(body)
        try:
            TrainConfig.from_file(path)
        except UserError as exc:
            assert len(str(exc).splitlines()) == 1, str(exc)


@given(JSON_VALUES | st.integers(min_value=10**5000, max_value=10**5001) | st.text())
def test_shorten_is_one_short_line(value):
    text = shorten(value)
    assert len(text) <= 40 and "\n" not in text and "\r" not in text


def test_shorten_survives_a_deep_value():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert len(shorten(deep)) <= 40


# --- item 3: export -----------------------------------------------------------------------------------------

@pytest.fixture
def done_run(tiny_model_dir, corpus) -> str:
    """A run marked done whose model is the tiny model (export copies it; nothing is trained)."""
    store = RunStore()
    run_id = store.create("train", TrainConfig(corpus=str(corpus), model=str(tiny_model_dir)).to_dict())
    store.mark_done(run_id, artefacts={"model": str(tiny_model_dir)})
    return run_id


def test_export_into_an_existing_file_exits_2(done_run, tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("mine")
    assert main(["export", done_run, "--out", str(target), "--no-embeddings"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(target) in err and "file" in err, err
    assert target.read_text() == "mine"
    assert main(["export", done_run, "--out", str(target / "sub"), "--no-embeddings"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("out", ["", "  "])
def test_export_to_an_empty_folder_name_exits_2_and_writes_nothing(out, done_run, tmp_path, monkeypatch, capsys):
    """`--out ""` exported into the current folder (issue 33)."""
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    assert main(["export", done_run, "--out", out, "--no-embeddings"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "output folder is empty" in err, err
    assert sorted(tmp_path.iterdir()) == before


def test_an_export_that_loses_the_race_to_another_says_the_target_exists(done_run, tmp_path, monkeypatch, capsys):
    """Two exports of one run into one folder at once: the loser said "Directory not empty" about its hidden temp
    folder (issue 33); it names the target, which the winner wrote, and leaves no temp folder."""
    out = tmp_path / "out"
    real_rename = Path.rename

    def winner_first(self, target):
        Path(target).mkdir()
        (Path(target) / "model").mkdir()  # what the other export renamed into place a moment earlier
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", winner_first)
    assert main(["export", done_run, "--out", str(out), "--no-embeddings"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already exists" in err and ".tmp" not in err, err
    assert [p.name for p in out.iterdir()] == [p.name for p in out.iterdir() if not p.name.startswith(".")]


@pytest.mark.parametrize("where,code", [("tempfile.mkdtemp", errno.EACCES), ("shutil.copytree", errno.ENOSPC),
                                        ("shutil.make_archive", errno.ENOSPC)])
def test_export_into_a_read_only_or_full_folder_exits_2(where, code, done_run, tmp_path, monkeypatch, capsys):
    module, name = where.split(".")

    def fail(*args, **kwargs):
        where = args[0] if args else kwargs["dir"]
        raise OSError(code, "Permission denied" if code == errno.EACCES else "No space left on device", str(where))

    monkeypatch.setattr(f"{module}.{name}", fail)
    out = tmp_path / "out"
    assert main(["export", done_run, "--out", str(out), "--no-embeddings"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err, err
    assert ("disk is full" if code == errno.ENOSPC else "ermission") in err
    assert list(out.iterdir()) == []  # the staging folder is gone
    with pytest.raises(UserError):
        export_run(RunStore(), done_run, out, embeddings=False)


# --- item 3: the runs database ------------------------------------------------------------------------------

def test_busy_database_says_which_process_holds_it(monkeypatch, capsys):
    RunStore()
    db = home() / "runs.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"con = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "con.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(core.runs.store, "BUSY_TIMEOUT_S", 0.5)
        named = str(holder.pid) if Path("/proc/locks").exists() else "fuser"  # without procfs: how to find it
        with pytest.raises(UserError, match=f"busy.*{named}") as caught:
            RunStore().create("train", {})
        assert len(str(caught.value).splitlines()) == 1
        assert main(["runs"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(db) in err and named in err, err
    finally:
        holder.kill()
        holder.wait()
    assert RunStore().list() == []  # free again: nothing was left half-written


@pytest.mark.parametrize("damage", ["garbage", "scrambled"])
def test_corrupt_database_is_named_and_never_overwritten(damage, capsys):
    db = home() / "runs.sqlite"
    if damage == "garbage":
        db.write_bytes(b"this is not a database\x00\xff" * 500)
    else:  # a real database whose pages after the header are junk
        store = RunStore()
        for _ in range(30):
            store.create("train", {"corpus": "x" * 500})
        body = bytearray(db.read_bytes())
        body[100:] = bytes((i * 7 + 3) % 256 for i in range(len(body) - 100))
        db.write_bytes(bytes(body))
    before = db.read_bytes()
    for argv in (["runs"], ["export", "20260101-000000-000-abcdef", "--out", "x"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(db) in err and "move it aside" in err, err
    assert db.read_bytes() == before


def test_full_disk_names_the_path(monkeypatch, capsys):
    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    fresh = home() / "fresh"
    monkeypatch.setenv("CONTRASTLAB_HOME", str(fresh))
    with monkeypatch.context() as m:
        m.setattr(Path, "mkdir", no_space)
        assert main(["runs"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(fresh) in err and "disk is full" in err, err

    store = RunStore()
    with monkeypatch.context() as m:
        m.setattr(Path, "mkdir", no_space)
        with pytest.raises(UserError, match="disk is full"):
            store.create("train", {})
    assert store.list() == []


class FullConnection(sqlite3.Connection):
    """A connection on a disk that just filled up: every write fails as SQLite reports it."""

    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE")):
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorcode, exc.sqlite_errorname = 13, "SQLITE_FULL"
            raise exc
        return super().execute(sql, *args)


def test_full_disk_during_a_run_is_one_line(monkeypatch, capsys):
    store = RunStore()
    run_id = store.create("train", {})
    connect = sqlite3.connect
    with monkeypatch.context() as m:
        m.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, factory=FullConnection, **k))
        with pytest.raises(UserError, match="disk is full") as caught:
            store.set_progress(run_id, step=1)
        assert str(store.db_path) in str(caught.value) and len(str(caught.value).splitlines()) == 1
        with pytest.raises(UserError, match="disk is full"):
            store.create("train", {})
    assert [(r.id, r.progress) for r in store.list()] == [(run_id, {})]  # the failed writes left nothing behind
    assert [p.name for p in store.root.iterdir() if p.is_dir()] == [run_id]
