"""Training engine on a tiny model: every recipe learns, freezing works, bad configs are refused, and the
CLI runs a real background worker, exports, and the export reloads with the same embeddings."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.data.corpus import demo_corpus_path, demo_documents_path, load_corpus
from core.errors import UserError
from core.training.config import TrainConfig
from core.training.recipes import RECIPES, get_recipe
from core.training.trainer import freeze, make_trainer

REPO = Path(__file__).resolve().parents[1]


def _eval_loss(trainer, dataset) -> float:
    return trainer.evaluate(eval_dataset=dataset)["eval_loss"]


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_every_recipe_lowers_its_loss(recipe, tiny_model_dir, tmp_path):
    from core.models.loading import load_model

    self_supervised = RECIPES[recipe].self_supervised
    corpus_path = demo_documents_path() if self_supervised else demo_corpus_path()
    own = {p.name for p in RECIPES[recipe].params}
    mining = {"threshold": 0.0} if "threshold" in own else {}  # a setting of the mining recipes only
    cfg = TrainConfig(corpus=str(corpus_path), model=str(tiny_model_dir), recipe=recipe, examples=48,
                      batch_size=16, epochs=4, lr=2e-3, warmup_ratio=0.0, **mining)
    model = load_model(str(tiny_model_dir), "cpu")
    dataset, stats = get_recipe(recipe).build_examples(cfg, load_corpus(cfg.corpus), model)
    assert stats["examples"] == len(dataset) == 48
    loss = get_recipe(recipe).build_loss(model, cfg)
    trainer = make_trainer(cfg, model, loss, dataset, tmp_path, reporter=None)
    before = _eval_loss(trainer, dataset)
    trainer.train()
    after = _eval_loss(trainer, dataset)
    assert np.isfinite(after) and after < before, (recipe, before, after)


def test_pairs_per_document_draws_more_distinct_crop_pairs():
    docs = str(demo_documents_path())
    crop = get_recipe("crop")
    one, one_stats = crop.build_examples(TrainConfig(corpus=docs, recipe="crop", examples=10**6), load_corpus(docs),
                                         None)
    three, three_stats = crop.build_examples(TrainConfig(corpus=docs, recipe="crop", examples=10**6,
                                                         pairs_per_doc=3), load_corpus(docs), None)
    used = one_stats["documents"] - one_stats["skipped_docs"]
    assert len(one) == used and 2 * used < len(three) <= 3 * used
    pairs = list(zip(three["anchor"], three["positive"]))
    assert len(set(pairs)) == len(pairs) and all(a != p for a, p in pairs)


def test_freeze_embeddings_and_first_layers(tiny_model_dir):
    from core.models.loading import load_model

    model = load_model(str(tiny_model_dir), "cpu")
    stats = freeze(model, embeddings=True, first_layers=1)
    for name, p in model[0].model.named_parameters():
        frozen = name.startswith("embeddings.") or ".layer.0." in name
        assert p.requires_grad != frozen, name
    assert 0 < stats["frozen_params"] < stats["total_params"]
    with pytest.raises(UserError, match="has 2"):
        freeze(model, embeddings=False, first_layers=5)


@pytest.mark.parametrize("bad,match", [
    ({"recipe": "nope"}, "Unknown recipe"),
    ({"margin": -1.0}, "margin must be a finite number >= 0"),
    ({"examples": 0}, "examples must be a whole number in \\[1,"),
    ({"pooling": "median"}, "pooling must be one of"),
    ({"surprise": 1}, "Unknown config keys"),
    ({"recipe": "crop", "pairs_per_doc": 0}, "pairs_per_doc must be a whole number in \\[1,"),
])
def test_bad_configs_are_refused(bad, match):
    with pytest.raises(UserError, match=match):
        TrainConfig.from_dict({"corpus": "x.csv", **bad})


def _cli(*args, env_home, timeout=240):
    import os

    env = dict(os.environ, CONTRASTLAB_HOME=str(env_home), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "core", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=timeout)


def test_cli_bad_inputs_exit_2(tiny_model_dir, tmp_path, capsys):
    from core.cli import main

    bad_file = tmp_path / "bad.csv"
    bad_file.write_bytes(b"\x00\x01\x02garbage\xff\xfe")
    for args in (
        ["train", str(bad_file), "--model", str(tiny_model_dir)],
        ["train", str(demo_corpus_path()), "--recipe", "nope"],
        ["train", str(demo_corpus_path()), "--margin", "-1"],
        ["crop", str(demo_documents_path()), "--pairs-per-doc", "0"],
        ["train", str(demo_corpus_path()), "--model", str(tmp_path / "no-such-model")],
        ["evaluate", str(tmp_path / "missing.csv")],
        ["export", "20990101-000000-000-abcdef", "--out", str(tmp_path)],
    ):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "Traceback" not in err, err


def test_cli_zero_examples_after_mining_exits_2(tiny_model_dir, capsys):
    from core.cli import main

    code = main(["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--threshold", "1.0",
                 "--examples", "16", "--foreground"])
    assert code == 2 and "lower the threshold" in capsys.readouterr().err


# A clean process (plain sentence-transformers, no ContrastLab on its path) reads the exported model's path and the
# texts on stdin, so its slow library import overlaps the CLI's training instead of following it.
RELOAD_SCRIPT = ("import sys, json, numpy as np; from sentence_transformers import SentenceTransformer; "
                 "path, texts = input(), json.loads(input()); m = SentenceTransformer(path, device='cpu'); "
                 "print(json.dumps(m.encode(texts).tolist()))")


def test_cli_train_export_reload(tiny_model_dir, contrastlab_home, tmp_path):
    with subprocess.Popen([sys.executable, "-c", RELOAD_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}) as reload:  # on a failure below,
        _train_export_reload(tiny_model_dir, contrastlab_home, tmp_path, reload)  # closing stdin ends it


def _train_export_reload(tiny_model_dir, contrastlab_home, tmp_path, reload: subprocess.Popen) -> None:
    out = _cli("train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--recipe", "triplet",
               "--margin", "0.1", "--examples", "64", "--batch-size", "16", "--lr", "1e-3", "--json",
               "--out", str(tmp_path / "export"), env_home=contrastlab_home)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "done"
    for key in ("polarity", "polarity_sd", "similarity", "similarity_sd", "knn_accuracy", "linear_accuracy",
                "n_queries", "n_pool"):
        assert key in result["before"] and key in result["after"]
    exported = Path(result["export"]["model"])
    assert {"model", "model.zip", "config.yaml", "config.json", "embeddings.parquet", "embeddings.npy"} <= set(
        result["export"]["files"])
    card = (exported / "README.md").read_text()
    assert "ContrastLab fine-tuning" in card and "margin = 0.1" in card
    assert "746 train rows, 83 holdout rows, 4 classes" in card
    stored = json.loads((exported.parent / "config.json").read_text())
    # the detected columns are stored, as the pages store them, so a CLI run and a page run compare column by column
    assert (stored["text_col"], stored["label_col"], stored["split_col"]) == ("text", "label", None)
    # a clean process loading the export with plain sentence-transformers gets the same embeddings
    texts = ["the film was good", "the market fell"]
    stdout, stderr = reload.communicate(f"{exported}\n{json.dumps(texts)}\n", timeout=120)
    assert reload.returncode == 0, stderr
    from core.models.loading import load_model

    here = load_model(result["model_path"], "cpu").encode(texts)
    np.testing.assert_allclose(np.array(json.loads(stdout)), here, atol=1e-5)
    # the run is listed, and a second export into the same folder is refused, not overwritten
    runs = json.loads(_cli("runs", "--json", env_home=contrastlab_home).stdout)["runs"]
    assert runs[0]["run_id"] == result["run_id"] and runs[0]["status"] == "done"
    again = _cli("export", result["run_id"], "--out", str(tmp_path / "export"), env_home=contrastlab_home)
    assert again.returncode == 2 and "already exists" in again.stderr


# slow: test_reliability_runs.py::test_a_run_stopped_by_sigterm_exits_as_interrupted_with_its_status[sweep-cli] covers
# `python -m core sweep --margins ... --json` starting its worker and printing each margin's run, and
# test_ray_sweep.py::test_a_two_margin_sweep_on_ray_records_both_runs_with_the_local_engines_metrics (its engine-local
# sweep) covers a two-margin sweep training each margin to done with its metrics after training.
@pytest.mark.slow
def test_cli_sweep_trains_each_margin(tiny_model_dir, contrastlab_home):
    out = _cli("sweep", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--recipe", "triplet",
               "--margins", "0.1,1", "--examples", "32", "--batch-size", "16", "--json", env_home=contrastlab_home)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [r["margin"] for r in result["runs"]] == [0.1, 1.0]
    assert all(r["status"] == "done" and r["after"]["polarity"] is not None for r in result["runs"])
