"""Checkpoint selection (core.training.selection, docs/definitions.md): a run with select_split scores step 0 and
later checkpoints on a validation split of its STS corpus, keeps the best (a tie keeping the earlier step), and its
evaluation after training, saved model and card describe that checkpoint; bad settings are one line each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from core.cli import main
from core.data.corpus import demo_corpus_path
from core.data.pairs import load_pair_split, load_pairs
from core.errors import UserError
from core.evaluation.sts import sts_spearman
from core.models.encode import encode
from core.models.loading import load_model, model_fingerprint
from core.runs.store import RunStore
from core.training.card import contrastlab_card_section
from core.training.config import TrainConfig
from core.training.selection import CheckpointSelection, selection_pairs
from core.training.trainer import run_training
from tests.tiny_model import SECOND_PASS_ATOL

WORDS = ("the cat dog sat ran on a mat big small red house tree river over under blue green old young bird fish "
         "king ship road rain song door").split()
PAIRS_PER_SPLIT = 24
STEPS = 8  # 64 examples in batches of 8, one epoch
SETTINGS = {"corpus": str(demo_corpus_path()), "examples": 64, "batch_size": 8, "epochs": 1, "threshold": 0.0,
            "warmup_ratio": 0.0, "device": "cpu", "select_split": "validation", "select_every": 3}


class Quiet:
    """A reporter that keeps nothing (core.training.trainer.Reporter)."""

    def progress(self, **fields) -> None: ...
    def should_stop(self) -> bool: return False
    def log_loss(self, step: int, loss: float) -> None: ...
    def log_eval(self, point: dict) -> None: ...


def pair_table(splits: dict[str, int] | None = None, seed: int = 0) -> pd.DataFrame:
    """Pairs whose second text is the first with 0-5 of its 6 words replaced, scored 5 minus the words replaced: a
    random model's cosine already follows that score, and a wrecked one's does not. `splits`: rows per split."""
    rng = np.random.default_rng(seed)
    rows = []
    for split, n in (splits or {"train": 12, "validation": PAIRS_PER_SPLIT, "test": PAIRS_PER_SPLIT}).items():
        for i in range(n):
            first = list(rng.choice(WORDS, size=6))
            changed = i % 6
            second = [str(rng.choice(WORDS)) if j < changed else word for j, word in enumerate(first)]
            rows.append({"text1": " ".join(first) + f" {split} {i}", "text2": " ".join(second) + f" {split} {i}",
                         "score": float(5 - changed), "split": split})
    return pd.DataFrame(rows)


def write_pairs(folder: Path, name: str = "sts.csv", **kwargs) -> Path:
    path = folder / name
    pair_table(**kwargs).to_csv(path, index=False)
    return path


def train(root: Path, model_dir: Path, **settings) -> tuple[dict, TrainConfig, Path]:
    """A tiny triplet run on the demo corpus with selection on `root`/sts.csv: (result, config, model folder)."""
    cfg = TrainConfig(**{**SETTINGS, "model": str(model_dir), "sts_corpus": str(write_pairs(root)), **settings})
    with pytest.MonkeyPatch.context() as mp:  # module scope: the per-test home fixture is not in place yet
        mp.setenv("CONTRASTLAB_HOME", str(root / "home"))
        result = run_training(cfg, Quiet(), root / "work")
    return result, cfg, root / "work" / "model"


@pytest.fixture(scope="module")
def wrecked(tmp_path_factory, tiny_model_dir) -> tuple[dict, TrainConfig, Path]:
    """A run whose learning rate (1.0) wrecks the model: step 0 is the checkpoint to keep."""
    return train(tmp_path_factory.mktemp("wrecked"), tiny_model_dir, lr=1.0)


@pytest.fixture(scope="module")
def learning(tmp_path_factory, tiny_model_dir) -> tuple[dict, TrainConfig, Path]:
    """A run scored every other step whose learning rate first helps on the validation pairs, then overshoots: a
    checkpoint between the first and the last step is the one to keep."""
    return train(tmp_path_factory.mktemp("learning"), tiny_model_dir, lr=2e-2, select_every=2)


# --- a run that selects --------------------------------------------------------------------------------------------


def test_a_wrecked_run_keeps_step_0_and_saves_the_base_model(wrecked, tiny_model_dir):
    result, cfg, saved = wrecked
    selection = result["selection"]
    assert [p["step"] for p in selection["points"]] == [0, 3, 6, STEPS]
    assert (selection["split"], selection["every"], selection["pairs"]) == ("validation", 3, PAIRS_PER_SPLIT)
    assert selection["best_step"] == 0 and selection["best"] == selection["points"][0]["sts_spearman"]
    assert all(p["sts_spearman"] is None or p["sts_spearman"] < selection["best"] for p in selection["points"][1:])
    assert result["timings"]["select_s"] > 0
    base, kept = load_model(str(tiny_model_dir), "cpu"), load_model(str(saved), "cpu")
    assert model_fingerprint(kept) == model_fingerprint(base)
    texts = ["the cat sat on the mat", "a big red house by the river"]
    np.testing.assert_allclose(encode(kept, texts).embeddings, encode(base, texts).embeddings, rtol=0,
                               atol=SECOND_PASS_ATOL)
    assert result["after"]["sts_spearman"] == pytest.approx(result["before"]["sts_spearman"], abs=1e-9)
    assert result["after"]["polarity"] == pytest.approx(result["before"]["polarity"], abs=1e-9)


def test_the_after_evaluation_and_saved_model_are_the_kept_checkpoint(learning):
    result, cfg, saved = learning
    selection = result["selection"]
    steps = [p["step"] for p in selection["points"]]
    scores = [p["sts_spearman"] for p in selection["points"]]
    assert steps == [0, 2, 4, 6, STEPS]
    assert 0 < selection["best_step"] < STEPS and selection["best"] > scores[-1]  # the kept one is not the last
    assert selection["best"] == max(scores) and steps[scores.index(max(scores))] == selection["best_step"]
    kept = load_model(str(saved), "cpu")
    validation = load_pair_split(cfg.sts_corpus, "validation")
    assert sts_spearman(kept, validation) == pytest.approx(selection["best"], abs=1e-4)
    assert sts_spearman(kept, load_pairs(cfg.sts_corpus)) == pytest.approx(result["after"]["sts_spearman"], abs=1e-4)


@pytest.mark.slow  # torchrun over 2 processes: 18-38 s; the selection itself is tested in one process above
def test_a_run_over_two_processes_selects_on_rank_0(tiny_model_dir, tmp_path, capsys):
    """Rank 0 scores and keeps the checkpoint while the other rank waits for it at the next step (PyTorch DDP,
    gloo on the CPU): the run is recorded once, with the kept checkpoint saved."""
    sts = write_pairs(tmp_path)
    args = ["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--nproc", "2", "--examples", "64",
            "--batch-size", "8", "--epochs", "2", "--lr", "2e-2", "--warmup-ratio", "0", "--threshold", "0",
            "--device", "cpu", "--sts-corpus", str(sts), "--select-split", "validation", "--select-every", "3"]
    assert main(args) == 0, capsys.readouterr().err[-2000:]
    [run] = RunStore().list()
    selection = run.progress["summary"]["selection"]
    assert [p["step"] for p in selection["points"]] == [0, 3, 6, STEPS]  # 64 examples, 8 x 2 a step, 2 epochs
    kept = load_model(run.artefacts["model"], "cpu")
    assert sts_spearman(kept, load_pair_split(sts, "validation")) == pytest.approx(selection["best"], abs=1e-4)


# --- ties and the kept weights, without training ------------------------------------------------------------------


class _State:
    def __init__(self, step: int, max_steps: int) -> None:
        self.global_step, self.max_steps = step, max_steps


class _Control:
    def __init__(self, stop: bool = False) -> None:
        self.should_training_stop = stop


def _drive(monkeypatch, tmp_path, scores: dict[int, float | None], every: int, max_steps: int,
           ended: int | None = None, cancelled: bool = False) -> tuple:
    """A CheckpointSelection driven through a run of `max_steps` steps (ending after step `ended`, by default the
    last; `cancelled`: stopped there on request) on a one-weight model whose weight is the step number, each step
    scoring scores[step]: (the callback, the model after training ended)."""
    model = torch.nn.Linear(1, 1, bias=False)
    monkeypatch.setattr("core.training.selection.sts_spearman",
                        lambda m, pairs, progress=None: scores[int(m.weight.item())])
    pairs = load_pair_split(write_pairs(tmp_path), "validation")
    selection = CheckpointSelection(pairs, every)
    with torch.no_grad():
        model.weight.fill_(0)
    selection.on_train_begin(None, _State(0, max_steps), _Control(), model=model)
    ended = max_steps if ended is None else ended
    for step in range(1, ended + 1):
        with torch.no_grad():
            model.weight.fill_(step)
        stop = step == max_steps or (cancelled and step == ended)  # as transformers and the progress callback set it
        selection.on_step_end(None, _State(step, max_steps), _Control(stop), model=model)
    selection.on_train_end(None, _State(ended, max_steps), _Control(ended == max_steps or cancelled), model=model)
    return selection, model


def test_a_tie_keeps_the_earlier_step(monkeypatch, tmp_path):
    selection, model = _drive(monkeypatch, tmp_path, {0: 50.0, 2: 61.0, 4: 61.0, 6: 55.0, 7: 61.0}, 2, 7)
    assert [p["step"] for p in selection.points] == [0, 2, 4, 6, 7]
    assert (selection.best_step, selection.best) == (2, 61.0)
    assert model.weight.item() == 2  # the kept weights are step 2's, loaded back when training ended


def test_step_0_wins_a_tie_and_an_unscorable_checkpoint_never_wins(monkeypatch, tmp_path):
    selection, model = _drive(monkeypatch, tmp_path, {0: 40.0, 5: None, 10: 40.0}, 5, 10)
    assert (selection.best_step, model.weight.item()) == (0, 0)
    assert selection.record()["points"] == [{"step": 0, "sts_spearman": 40.0}, {"step": 5, "sts_spearman": None},
                                            {"step": 10, "sts_spearman": 40.0}]


def test_a_run_whose_batches_run_out_early_scores_its_last_step_and_a_cancelled_one_does_not(monkeypatch, tmp_path):
    scores = {s: float(s) for s in range(0, 11)}
    selection, model = _drive(monkeypatch, tmp_path, scores, 3, 10, ended=8)
    assert [p["step"] for p in selection.points] == [0, 3, 6, 8] and model.weight.item() == 8
    selection, model = _drive(monkeypatch, tmp_path, {s: 10.0 - s for s in range(0, 11)}, 3, 10, ended=6,
                              cancelled=True)
    assert [p["step"] for p in selection.points] == [0, 3]  # step 6 was where the cancel stopped it: not scored


def test_the_last_step_kept_needs_no_copy_and_every_0_scores_five_times(monkeypatch, tmp_path):
    selection, model = _drive(monkeypatch, tmp_path, {s: float(s) for s in range(0, 13)}, 0, 12)
    assert selection.every == 3 and [p["step"] for p in selection.points] == [0, 3, 6, 9, 12]
    assert (selection.best_step, model.weight.item()) == (12, 12)


# --- bad settings: one line each ------------------------------------------------------------------------------------


@pytest.mark.parametrize("settings,words", [
    ({"select_split": "validation"}, ["select_split", "sts_corpus"]),
    ({"select_split": "test", "sts_corpus": "s.csv"}, ["select_split cannot be test", "optimistic"]),
    ({"select_split": " TEST ", "sts_corpus": "s.csv"}, ["select_split cannot be test"]),
    ({"select_split": "   ", "sts_corpus": "s.csv"}, ["select_split is empty; give a value"]),
    ({"select_every": 3}, ["select_every", "select_split"]),
    ({"select_every": -1, "select_split": "validation", "sts_corpus": "s.csv"}, ["select_every must be a whole"]),
    ({"select_every": 2.5, "select_split": "validation", "sts_corpus": "s.csv"}, ["select_every must be a whole"]),
    ({"select_every": "often", "select_split": "validation", "sts_corpus": "s.csv"}, ["select_every must be"]),
    ({"select_every": 10**7, "select_split": "validation", "sts_corpus": "s.csv"}, ["select_every must be a whole"]),
])
def test_bad_selection_settings_are_one_line(settings, words):
    with pytest.raises(UserError) as caught:
        TrainConfig(corpus="x.csv", **settings)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and all(word in message for word in words), message


def test_an_empty_select_split_is_unset_and_a_split_is_read_as_the_loader_reads_it():
    assert TrainConfig(corpus="x.csv", select_split="").select_split is None
    assert TrainConfig(corpus="x.csv", sts_corpus="s.csv", select_split=" Validation ").select_split == "validation"


@pytest.mark.parametrize("split,table,words", [
    ("dev", {}, ["select_split", "no split 'dev'", "'train' (12 rows)", "'validation' (24 rows)", "'test' (24 rows)"]),
    ("validation", {"splits": {"train": 12, "validation": 5, "test": 24}}, ["only 5 rows", "'validation' (5 rows)"]),
    ("validation", {"splits": {"train": 12, "validation": 24}}, ["holds the validation pairs", "optimistic"]),
    ("train", {"splits": {"train": 120}}, ["holds the holdout pairs", "optimistic"]),
])
def test_a_split_the_sts_corpus_cannot_select_on_is_one_line_naming_its_splits(split, table, words, tmp_path):
    path = write_pairs(tmp_path, **table)
    cfg = TrainConfig(corpus="x.csv", sts_corpus=str(path), select_split=split)
    with pytest.raises(UserError) as caught:
        selection_pairs(cfg, load_pairs(path))
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and all(word in message for word in words), message


def test_a_split_without_scores_or_with_one_score_is_refused(tmp_path):
    labelled = tmp_path / "nli.csv"
    pair_table().drop(columns="score").assign(label="neutral").to_csv(labelled, index=False)
    cfg = TrainConfig(corpus="x.csv", sts_corpus=str(labelled), select_split="validation")
    with pytest.raises(UserError, match="no score column"):
        selection_pairs(cfg, load_pairs(labelled))
    flat = tmp_path / "flat.csv"
    table = pair_table()
    table.loc[table.split == "validation", "score"] = 2.0
    table.to_csv(flat, index=False)
    cfg = TrainConfig(corpus="x.csv", sts_corpus=str(flat), select_split="validation")
    with pytest.raises(UserError, match="same score"):
        selection_pairs(cfg, load_pairs(flat))
    unscored = tmp_path / "unscored.csv"
    table.loc[table.split == "validation", "score"] = np.nan
    table.to_csv(unscored, index=False)
    cfg = TrainConfig(corpus="x.csv", sts_corpus=str(unscored), select_split="validation")
    with pytest.raises(UserError) as caught:
        selection_pairs(cfg, load_pairs(unscored))
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "its splits: 'train' (12 rows), 'validation' (24 rows)" in message
    assert "marks as test or validation all lack a score in 'score'" in message


def test_a_run_refuses_a_bad_split_before_loading_a_model(tmp_path, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("core.training.trainer.load_model", no_model)
    cfg = TrainConfig(**{**SETTINGS, "sts_corpus": str(write_pairs(tmp_path)), "select_split": "dev"})
    with pytest.raises(UserError, match="no split 'dev'"):
        run_training(cfg, Quiet(), tmp_path / "work")


# --- the model card -------------------------------------------------------------------------------------------------


def test_the_card_says_which_checkpoint_was_kept_and_why(wrecked, learning):
    result, cfg, saved = wrecked
    card = (saved / "README.md").read_text(encoding="utf-8")
    [line] = [line for line in card.splitlines() if line.startswith("- **Checkpoint:**")]
    assert line.startswith(f"- **Checkpoint:** step 0 of {STEPS}, the model before training: no later checkpoint beat "
                           "its STS Spearman on the validation split of `sts.csv`")
    assert "so the saved model has the base model's weights" in line and "our assumption" in line
    result, cfg, _saved = learning
    points = [{"step": 0, "sts_spearman": 40.0}, {"step": 4, "sts_spearman": 52.5}, {"step": STEPS, "sts_spearman": 50}]
    picked = {**result, "selection": {**result["selection"], "points": points, "best_step": 4, "best": 52.5}}
    assert (f"- **Checkpoint:** step 4 of {STEPS}, the best STS Spearman on the validation split of `sts.csv` (52.5; "
            "step 0, the model before training, 40.0; 3 checkpoints scored: step 0, every 2 steps and the last); "
            "selecting a checkpoint is our assumption") in contrastlab_card_section(cfg, picked)
    plain = {k: v for k, v in result.items() if k != "selection"}
    assert "Checkpoint" not in contrastlab_card_section(cfg, plain)


def test_the_split_that_picks_the_checkpoint_is_not_called_unused(tiny_model_dir, tmp_path, capsys):
    """Issue 51: `--select-split validation` warned that the STS corpus's validation rows were "not used for
    training or evaluation", although they pick the checkpoint."""
    from core.cli import training

    sts = write_pairs(tmp_path)
    settings = dict(corpus=str(demo_corpus_path()), model=str(tiny_model_dir), sts_corpus=str(sts))
    training._check_inputs(TrainConfig(**settings))
    assert "not used for training or evaluation" in capsys.readouterr().err  # without selection they are unused
    training._check_inputs(TrainConfig(**settings, select_split="validation"))
    assert "not used" not in capsys.readouterr().err


def test_the_cli_and_its_json_say_when_the_saved_model_is_step_0(tiny_model_dir, tmp_path, capsys):
    """Issue 51: a run whose selection kept step 0 printed its after-figures and never said "kept step 0 of 24";
    --json had no selection. The saved model is then the base model, and both say so in words."""
    import json

    args = ["train", str(demo_corpus_path()), "--model", str(tiny_model_dir), "--examples", "64", "--batch-size", "8",
            "--lr", "1.0", "--warmup-ratio", "0", "--threshold", "0", "--device", "cpu", "--sts-corpus",
            str(write_pairs(tmp_path)), "--select-split", "validation", "--select-every", "3", "--foreground"]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["selection"]["best_step"] == 0 and result["selection"]["split"] == "validation"
    assert result["checkpoint"].startswith(f"step 0 of {STEPS}, the model before training: no later checkpoint beat "
                                           "its STS Spearman on the validation split of sts.csv")
    assert result["checkpoint"].endswith("so the saved model has the base model's weights")
    assert main(args) == 0
    assert f"checkpoint: step 0 of {STEPS}, the model before training" in capsys.readouterr().out


def test_the_runs_page_says_which_checkpoint_a_run_saved(app, contrastlab_home):
    import os

    from tests.conftest import no_errors

    store = RunStore()
    run_id = store.create("train", {"recipe": "triplet", "corpus": str(demo_corpus_path()), "sts_corpus": "sts.csv"})
    store.mark_running(run_id, os.getpid())
    points = [{"step": 0, "sts_spearman": 50.0}, {"step": 12, "sts_spearman": 20.0}]
    store.set_progress(run_id, summary={"steps": 12, "selection": {
        "split": "validation", "pairs": 30, "every": 12, "points": points, "best_step": 0, "best": 50.0}})
    store.mark_done(run_id, {"polarity": 60.0, "similarity": 40.0}, {})
    app.run()
    at = app.switch_page("app_pages/7_Runs.py").run()
    no_errors(at)
    assert any(c.value.startswith("Checkpoint: step 0 of 12, the model before training: no later checkpoint beat its "
                                  "STS Spearman on the validation split of sts.csv")
               and c.value.endswith("so the saved model has the base model's weights.") for c in at.caption)
