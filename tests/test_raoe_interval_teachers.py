"""RAOE's rank margin across batch sizes (I given at the paper's batch of 512, I_eff = I x B / 512 in the loss, the
run summary, the card and the Train page) and teachers that are not the student (the self-distillation line, the
mean of several teachers' cosines, one-line refusals of malformed teacher lists)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.cli import build_parser, main
from core.cli.training import train_config
from core.data.pairs import load_pairs
from core.errors import UserError
from core.losses.raoe import rank_pair_mask
from core.models.encode import encode
from core.models.loading import load_model
from core.runs.store import RunStore
from core.training.card import contrastlab_card_section
from core.training.config import TrainConfig
from core.training.raoe import PAPER_BATCH, effective_interval, teacher_scores
from core.training.recipes import get_recipe
from tests.conftest import train_tiny_run
from tests.test_raoe_recipes import pair_file
from tests.tiny_model import build_tiny_model


def left_out(batch: int, interval: float) -> float:
    """The share of a batch's ordered pairs (distinct scores) that L_rank leaves out at this interval."""
    mask = rank_pair_mask(torch.arange(batch, dtype=torch.float32), interval)
    return 1 - int(mask.sum()) / (batch * (batch - 1) // 2)


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory) -> Path:
    """A second tiny model with other weights (narrower): a teacher that is not the student."""
    return build_tiny_model(tmp_path_factory.mktemp("other") / "model", hidden=16)


def test_i_is_given_at_the_papers_batch_and_scaled_to_the_runs() -> None:
    assert PAPER_BATCH == 512
    assert effective_interval(2, 512) == 2.0
    assert effective_interval(2, 32) == 0.125
    assert effective_interval(8, 64) == 1.0


def test_unscaled_i_leaves_out_more_of_a_small_batch_and_scaled_no_more_than_the_paper() -> None:
    assert left_out(32, 2) == pytest.approx(0.123, abs=0.001)  # (31 + 30) / 496: the design's ~12%
    assert left_out(512, 2) == pytest.approx(0.0078, abs=0.0001)  # 1021 / 130816: ~0.8%
    assert left_out(32, effective_interval(2, 32)) == 0.0  # I_eff = 0.125: every ordered pair is kept
    for batch in (256, 1024):  # I_eff >= 1: about the paper's share
        assert left_out(batch, effective_interval(2, batch)) == pytest.approx(left_out(512, 2), abs=1e-4)


def test_a_fractional_interval_compares_with_half_rank_differences() -> None:
    scores = torch.tensor([0.5, 0.2, 0.5, 0.9, 0.1])  # average ranks 2.5, 1, 2.5, 4, 0
    assert torch.equal(rank_pair_mask(scores, 0.125), rank_pair_mask(scores, 0))  # different scores: >= 1 apart
    assert torch.equal(rank_pair_mask(scores, 2.25), rank_pair_mask(scores, 2))  # differences are multiples of 1/2
    assert not torch.equal(rank_pair_mask(scores, 2.5), rank_pair_mask(scores, 2))  # 0.1 -> 0.5s: 2.5 apart
    assert not torch.equal(rank_pair_mask(scores, 1.0), rank_pair_mask(scores, 0.99))


@pytest.mark.parametrize(("recipe", "batch", "expected"), [
    ("raoe", 32, 0.125), ("raoe", 512, 2.0), ("raoe_rank", 128, 0.5), ("raoe_angle", 32, 0.0)])
def test_the_recipes_loss_ranks_with_i_eff(tiny_model, recipe: str, batch: int, expected: float) -> None:
    cfg = TrainConfig(corpus="pairs.csv", recipe=recipe, batch_size=batch)
    assert get_recipe(recipe).build_loss(tiny_model, cfg).interval == expected


def test_ddp_scales_to_the_batch_each_process_ranks(tiny_model) -> None:
    cfg = TrainConfig(corpus="pairs.csv", recipe="raoe", batch_size=32, nproc=4, device="cpu")
    assert cfg.effective_batch_size == 128
    assert get_recipe("raoe").build_loss(tiny_model, cfg).interval == 0.125
    assert get_recipe("raoe").derived(cfg) == {"interval_eff": 0.125, "interval_batch": 32}


def test_i_eff_is_in_the_run_summary_and_on_the_card(contrastlab_home, tiny_model_dir) -> None:
    run_id = train_tiny_run(contrastlab_home, tiny_model_dir, recipe="raoe", interval=4, threshold=-1.0)
    run = RunStore(contrastlab_home).get(run_id)
    assert run.progress["summary"]["derived"] == {"interval_eff": 0.125, "interval_batch": 16}  # 4 x 16 / 512
    card = (Path(run.artefacts["model"]) / "README.md").read_text(encoding="utf-8")
    assert "`interval_eff` = 0.125" in card and "`interval_batch` = 16" in card
    assert "is the model this run starts from (self-distillation)" in card


def test_the_card_names_the_teachers_that_gave_s(tiny_model_dir, other_model_dir) -> None:
    model = str(tiny_model_dir)

    def teacher_line(teacher: str) -> str:
        cfg = TrainConfig(corpus="pairs.csv", recipe="raoe", model=model, teacher=teacher)
        section = contrastlab_card_section(cfg, {})
        return next(line for line in section.splitlines() if line.startswith("- **Teacher:**"))

    other = str(other_model_dir)
    assert teacher_line(other) == f"- **Teacher:** the cosine of `{other}`"
    both = teacher_line(f"reference,{other}")
    assert both.startswith(f"- **Teacher:** the mean cosine of `{model}` (the reference model) and `{other}`")
    assert "`reference` is the model this run starts from (self-distillation)" in both
    assert teacher_line("score") == "- **Teacher:** the pair corpus's own score column (s = the gold score)"


def _cli_config(args: list[str]) -> dict:
    """The train command's settings as it checks them before any run (its notes on stderr)."""
    return train_config(build_parser().parse_args(["train", *args]))


@pytest.mark.parametrize("recipe", ["raoe", "raoe_rank", "listmle"])
def test_the_cli_says_in_one_line_that_the_reference_teacher_is_self_distillation(
        tmp_path, tiny_model_dir, recipe: str, capsys) -> None:
    corpus = str(pair_file(tmp_path, labels=True))
    _cli_config([corpus, "--model", str(tiny_model_dir), "--recipe", recipe, "--json"])
    out, err = capsys.readouterr()
    assert out == ""  # --json's stdout stays one JSON object
    (line,) = err.strip().splitlines()
    assert line.startswith("note: teacher reference is ") and "self-distillation" in line
    assert "`make mpnet`" in line and "models/all-mpnet-base-v2" in line and "any model folder" in line


def test_a_teacher_folder_equal_to_the_model_is_self_distillation_too(tmp_path, tiny_model_dir, capsys) -> None:
    _cli_config([str(pair_file(tmp_path)), "--model", str(tiny_model_dir), "--recipe", "raoe",
                 "--teacher", f"{tiny_model_dir}/"])
    assert "self-distillation" in capsys.readouterr().err


def test_no_self_distillation_line_for_a_teacher_that_is_not_the_student(
        tmp_path, tiny_model_dir, other_model_dir, capsys) -> None:
    corpus = str(pair_file(tmp_path))
    model = ["--model", str(tiny_model_dir), "--recipe", "raoe"]
    for teacher in (["--teacher", str(other_model_dir)], ["--teacher", "score"],
                    ["--reference", str(other_model_dir)]):  # 'reference' is then another model
        _cli_config([corpus, *model, *teacher])
        assert capsys.readouterr().err == "", teacher


def test_two_teachers_give_the_mean_of_their_cosines(tmp_path, tiny_model, other_model_dir) -> None:
    split = load_pairs(pair_file(tmp_path)).train
    text1, text2 = list(split.text1)[:12], list(split.text2)[:12]
    other = load_model(str(other_model_dir), device="cpu")

    def cosines(model) -> np.ndarray:
        a, b = encode(model, text1).embeddings, encode(model, text2).embeddings
        return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    cfg = TrainConfig(corpus="x", recipe="raoe", teacher=f"reference, {other_model_dir}", device="cpu")
    assert cfg.teacher == f"reference,{other_model_dir}"  # normalised
    mean = teacher_scores(cfg, tiny_model, text1, text2, None)
    np.testing.assert_allclose(mean, (cosines(tiny_model) + cosines(other)) / 2, atol=1e-5)
    assert not np.allclose(mean, cosines(tiny_model), atol=1e-3)  # the second teacher counts


@pytest.mark.parametrize(("teacher", "message"), [
    (",", "has an empty name"),
    ("reference,,x", "has an empty name"),
    ("reference,", "has an empty name"),
    ("a,a", "teacher 'a' is named twice"),
    ("score,x", "teacher 'score' (the pair corpus's own score column) cannot be averaged with models"),
    ("some.csv", "teacher 'some.csv' is a file, not a model"),
    ("missing.csv", "Could not find model 'missing.csv'"),
])
def test_a_malformed_teacher_exits_2_with_one_line_and_no_run(tmp_path, monkeypatch, teacher, message,
                                                               capsys) -> None:
    corpus = pair_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    Path("some.csv").write_text("text1,text2,score\na,b,1\n")
    assert main(["train", str(corpus), "--recipe", "raoe", "--teacher", teacher]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and message in err and len(err.strip().splitlines()) == 1
    assert RunStore().list() == []


def test_one_folder_named_twice_by_two_paths_is_one_teacher_named_twice(tmp_path, monkeypatch, tiny_model_dir,
                                                                         capsys) -> None:
    """The check compared strings, so `models/x,./models/x` (or a link to it) gave one teacher 2/3 of the weight
    (issue 33)."""
    corpus = pair_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    Path("link").symlink_to(tiny_model_dir)
    for teacher in (f"{tiny_model_dir},link", f"link,{tiny_model_dir}/", f"reference,link,{tiny_model_dir}/../"
                    f"{tiny_model_dir.name}"):
        assert main(["train", str(corpus), "--recipe", "raoe", "--teacher", teacher]) == 2, teacher
        err = capsys.readouterr().err
        assert "is named twice" in err and "one model" in err and len(err.strip().splitlines()) == 1, err
        first, second = (name for name in teacher.split(",") if name != "reference")
        assert f"(as {first!r} and {second!r}, one model)" in err, err  # both spellings whole, however long
    assert RunStore().list() == []


def test_a_teacher_folder_with_a_comma_says_commas_separate_teachers(tmp_path, monkeypatch, tiny_model_dir,
                                                                     capsys) -> None:
    corpus = pair_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    Path("my,model").symlink_to(tiny_model_dir)
    for teacher in ("my,model", "reference,my,model"):
        assert main(["train", str(corpus), "--recipe", "raoe", "--teacher", teacher]) == 2
        err = capsys.readouterr().err
        assert "'my,model' has a comma in its name, and commas separate teachers" in err, err
        assert len(err.strip().splitlines()) == 1
    assert RunStore().list() == []


def test_the_config_refuses_a_malformed_teacher_whatever_reads_it() -> None:
    with pytest.raises(UserError, match="named twice"):
        TrainConfig.from_dict({"corpus": "x", "recipe": "raoe_angle", "teacher": "reference, reference"})


def test_train_page_shows_i_eff_and_the_self_distillation_line(app, other_model_dir) -> None:
    at = app
    at.run()
    at.switch_page("app_pages/2_Train.py").run()
    at.selectbox(key="train:recipe:Supervised").set_value("raoe").run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("I_eff = 2 x 32 / 512 = 0.125 ranks") and "every ordered pair" in c.value
               for c in at.caption)
    (info,) = [i.value for i in at.info if "self-distillation" in i.value]
    assert "`make mpnet`" in info
    at.number_input(key="train:batch:sup").set_value(1024).run()
    assert any(c.value.startswith("I_eff = 2 x 1024 / 512 = 4 ranks") and "every ordered pair" not in c.value
               for c in at.caption)
    at.text_input(key="train:teacher").set_value(str(other_model_dir)).run()
    assert not [i for i in at.info if "self-distillation" in i.value]
    at.selectbox(key="train:recipe:Supervised").set_value("raoe_angle").run()
    assert not [c for c in at.caption if c.value.startswith("I_eff")]  # no rank term, no interval


def test_json_stdout_of_a_run_with_the_reference_teacher_is_one_object(tmp_path, tiny_model_dir, capsys) -> None:
    code = main(["train", str(pair_file(tmp_path)), "--model", str(tiny_model_dir), "--recipe", "raoe_rank",
                 "--examples", "16", "--batch-size", "8", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["status"] == "done"
    assert sum("self-distillation" in line for line in err.splitlines()) == 1


def test_listmle_averages_its_teachers_similarities_as_raoe_does(tiny_model, other_model_dir) -> None:
    import pandas as pd

    from core.data.lists import ListColumns, build_lists
    from core.training.listmle import list_examples
    from tests.test_pages_lists import list_table

    df = pd.read_csv(pd.io.common.StringIO(list_table()))
    lists = build_lists(df, ListColumns("qid", "rank", "passage", "fold"), "x")
    other = load_model(str(other_model_dir), device="cpu")

    def phi(model, members: list[str]) -> np.ndarray:
        e = encode(model, members).embeddings
        e = e / np.linalg.norm(e, axis=1, keepdims=True)
        return e @ e.T

    cfg = TrainConfig(corpus="x", recipe="listmle", teacher=f"reference,{other_model_dir}", w=0.0,
                      examples=len(lists.train.lists), device="cpu")
    _, stats = list_examples(cfg, lists, tiny_model, "lists")
    first = lists.train.lists[0]  # every list is chosen, in order: the preview is the first one's anchor row
    mean = (phi(tiny_model, first) + phi(other, first)) / 2
    np.testing.assert_allclose([row["teacher"] for row in stats["preview"]], mean[0, 1:], atol=1e-4)
    assert not np.allclose(mean[0, 1:], phi(tiny_model, first)[0, 1:], atol=1e-3)  # the second teacher counts


@pytest.mark.parametrize(("recipe", "flip", "expected"), [
    ("raoe", True, "Only 0% of the label-ordered pairs have a score that agrees"),
    ("raoe_angle", True, "Only 0% of the label-ordered pairs have a score that agrees"),
    ("raoe_rank", True, None),  # no angle term: nothing gated
    ("raoe", False, None),
])
def test_a_gated_share_below_a_fifth_is_warned_in_the_preview_stats(recipe, flip, expected) -> None:
    """Issue 26: labels and scores that fully disagree train L_angle on nothing, and nothing said so."""
    import pandas as pd

    from core.data.pairs import build_pairs, detect_pair_columns
    from core.training.raoe import ranked_pairs

    n = 100  # a 10% holdout of 10 scored pairs, the fewest STS Spearman is computed on (issue 26)
    labels = ["entailment", "neutral", "contradiction"]
    df = pd.DataFrame({"text1": [f"first {i}" for i in range(n)], "text2": [f"second {i}" for i in range(n)],
                       "score": [float(i % 3) for i in range(n)],  # label 0 (most related) gets the LOWEST score
                       "label": [labels[(i % 3) if flip else 2 - (i % 3)] for i in range(n)]})
    corpus = build_pairs(df, detect_pair_columns(df), "p")
    cfg = TrainConfig(corpus="p.csv", recipe=recipe, teacher="score", device="cpu")
    _, stats = ranked_pairs(cfg, corpus, None, "ranked pairs")
    assert stats.get("warning") is None if expected is None else expected in stats["warning"]


def test_pairs_of_one_label_say_the_angle_term_gates_nothing() -> None:
    from core.training.raoe import gated_share_warning

    cfg = TrainConfig(corpus="p.csv", recipe="raoe", teacher="score", device="cpu")
    assert gated_share_warning(cfg, None).startswith("Every pair has the same label")
    assert gated_share_warning(cfg, 0.75) is None
