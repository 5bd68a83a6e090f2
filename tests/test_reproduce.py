"""`python -m core reproduce NAME --data DIR` and the Reproductions page: each seed's headline experiment as child
runs of one reproduction run, reported as claim / published / ours with its 95% interval / what differs."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import core.jobs.launch
import core.jobs.worker
from core.cli import main
from core.errors import UserError
from core.reproduce import EXPERIMENTS, margins
from core.reproduce.experiment import Outcome, Setup
from core.reproduce.job import arms_of, latest
from core.reproduce.report import published_text, table_text
from core.runs.store import RunStore
from tests.conftest import no_errors
from tests.test_sts import pair_table

ROW_KEYS = {"claim", "published", "ours", "ci_low", "ci_high", "differs", "kind", "p_value", "comparable", "setting"}


@pytest.fixture
def synchronous(monkeypatch):
    """The reproduction's worker runs in this process, so a test sees it end."""
    monkeypatch.setattr(core.jobs.launch, "start",
                        lambda store, run_id, meet=None: core.jobs.worker.execute(store, run_id) or os.getpid())


@pytest.fixture
def stsb_dir(tmp_path) -> Path:
    """A data folder with an STS-B-shaped stsb.csv: 48 scored train pairs, 30 test pairs."""
    df = pair_table(n_test=30, n_train=48)
    df.loc[df["split"] == "train", "score"] = np.random.default_rng(0).uniform(0, 5, 48).round(2)
    df.to_csv(tmp_path / "stsb.csv", index=False)
    return tmp_path


@pytest.mark.parametrize("quick", [True, False])
def test_every_experiment_declares_runs_that_validate_on_its_own_files(quick, tiny_model_dir):
    data, model = Path("/data"), str(tiny_model_dir)
    for name, experiment in EXPERIMENTS.items():
        arms = arms_of({"name": name, "data": str(data), "quick": quick, "model": model})
        assert arms and len({a.label for a in arms}) == len(arms), name
        files = {str(data / s.file) for s in experiment.sources}
        for arm in arms:
            assert arm.config["corpus"] in files and arm.config["model"] == model, (name, arm.label)
            assert arm.config.get("sts_corpus") in files | {None}, (name, arm.label)


@pytest.mark.parametrize("quick", [True, False])
def test_raoe_and_crops_train_their_ablations_at_full_size_only(quick, tmp_path, monkeypatch):
    """The arms bench raoe and bench crops read from their reproductions: a lost arm would drop its row silently."""
    from core.reproduce import crops, raoe

    data, setup = Path("/data"), Setup(quick, "all-MiniLM-L6-v2")
    stage2 = ["CoSENT", "AnglE (angle term only)", "RAOE stage 2 (L_rank, s = gold score)"]
    stage1 = ["RAOE stage 1 (full loss)", "AnglE (angle term only) on SNLI", "RAOE stage 1, L_rank only",
              "RAOE stage 1, L_angle only",
              "RAOE stage 1, gate on labels only", "RAOE stage 1, gate on scores only"]
    monkeypatch.setattr(raoe, "MPNET", tmp_path / "missing")
    assert [a.label for a in raoe.arms(data, setup)] == stage2 + ([] if quick else stage1)
    (tmp_path / "modules.json").write_text("[]")
    monkeypatch.setattr(raoe, "MPNET", tmp_path)  # `make mpnet` installed it: stage 1 with it as the teacher too
    mpnet = [a for a in raoe.arms(data, setup) if a.label == raoe.MPNET_LABEL]
    assert [a.config["teacher"] for a in mpnet] == ([] if quick else [str(tmp_path)])

    arms = {a.label: a.config for a in crops.arms(data, setup)}
    assert list(arms) == ["crops", "dropout (baseline)"] + ([] if quick else [crops.TOP_ARM])
    if not quick:  # all-MiniLM-L6-v2 has 6 layers: the embeddings and the first 4 frozen
        top = arms[crops.TOP_ARM]
        assert (top["recipe"], top["freeze_embeddings"], top["freeze_layers"]) == ("crop", True, 4)


def test_the_full_raoe_and_crops_tables_have_a_row_per_arm(tmp_path, monkeypatch):
    from core.reproduce import raoe

    monkeypatch.setattr(raoe, "MPNET", tmp_path / "missing")
    metrics = {"sts_spearman": 80.0, "sts_spearman_ci": [79.0, 81.0], "knn_accuracy": 0.9,
               "knn_accuracy_ci": [0.88, 0.92]}
    tables = {}
    for name in ("raoe", "crops"):
        arms = arms_of({"name": name, "data": "/data", "quick": False, "model": "all-MiniLM-L6-v2"})
        outcomes = {a.label: Outcome("r", a.config, metrics, metrics) for a in arms}
        tables[name] = EXPERIMENTS[name].rows(outcomes, Setup(False, "all-MiniLM-L6-v2"))
    raoe_rows = tables["raoe"]
    figures = [r for r in raoe_rows if r.kind == "figure"]
    assert len(figures) == 10 and all(r.published is None and not r.comparable for r in figures)  # BERT-base: notes
    assert [r.differs.split("paper: ")[-1] for r in figures[1:4]] == [
        f"{v} (BERT-base trained on NLI, STS-B test), not comparable" for v in (78.99, 85.64)] + [
        "88.55 (BERT-base, RAOE stage 1 then fine-tuned on STS-B train with L_rank (stage 2), STS-B test), not "
        "comparable"]  # 88.55 is stage 2, not a model trained on NLI (issue 53)
    assert "the angle term alone" in figures[2].differs and "full AnglE objective" in figures[2].differs
    assert "no 'RAOE stage 2 - CoSENT' row is reported" in figures[3].differs  # I_eff 0.125: CoSENT's own pairs
    assert "85.64 (BERT-base trained on NLI, STS-B test)" in figures[5].differs  # AnglE on SNLI, as the paper's
    assert all("average of 7 STS tasks" in r.differs for r in figures[6:])
    differences = {r.claim: r.published for r in raoe_rows if r.kind == "difference"}
    assert differences == {"STS-B Spearman: AnglE (angle term only) - CoSENT": 6.65,
                           "STS-B Spearman: RAOE stage 1 - AnglE (angle term only) on SNLI": 1.95,
                           "STS-B Spearman: full loss - L_rank only": 0.8,
                           "STS-B Spearman: full loss - L_angle only": 1.09,
                           "STS-B Spearman: full loss - gate on labels only": 8.32,
                           "STS-B Spearman: full loss - gate on scores only": 0.81}
    crops_figures = [r for r in tables["crops"] if r.kind == "figure"]
    assert [r.ours for r in crops_figures] == [90.0] * 4 and "first 4 layers frozen" in crops_figures[3].differs
    assert [r.claim for r in tables["crops"] if r.kind == "difference"] == [
        "kNN accuracy (pp): crops - dropout", "kNN accuracy (pp): crops, top 2 layers - all layers"]
    gain = next(r for r in tables["crops"] if r.claim == "kNN accuracy (pp): crops - dropout")
    assert (gain.published, gain.comparable) == (6.7, False) and gain.setting.startswith("MPNet")  # Table 2
    assert published_text(asdict(gain)).startswith("+6.70 (MPNet, kNN accuracy (k = 10) averaged over six")


def test_a_quick_run_does_not_ask_for_a_file_only_the_full_run_reads(stsb_dir):
    raoe = EXPERIMENTS["raoe"]
    assert list(raoe.paths(stsb_dir, quick=True)) == ["stsb.csv"]
    with pytest.raises(UserError, match="needs snli.csv.*read by the full run only"):
        raoe.paths(stsb_dir, quick=False)


def test_rows_put_the_published_figure_beside_ours_and_its_interval():
    before = {"polarity": 63.5, "similarity": 45.0,
              "uncertainty": {"polarity_ci": [62.5, 64.5], "similarity_ci": [44.8, 45.2]}}
    after = {"polarity": 70.0, "similarity": 40.0,
             "uncertainty": {"polarity_ci": [69.0, 71.0], "similarity_ci": [39.5, 40.5]}}
    setup = Setup(quick=True, model="all-MiniLM-L6-v2")
    arms = arms_of({"name": "margins", "data": "/data", "quick": True, "model": "all-MiniLM-L6-v2"})
    outcomes = {a.label: Outcome("r", a.config, before, after) for a in arms}
    rows = EXPERIMENTS["margins"].rows(outcomes, setup)
    first = rows[0]
    assert (first.published, first.ours, first.ci_low, first.ci_high) == (63.0, 63.5, 62.5, 64.5)
    # after training, --quick is not the paper's budget: its figures go to the notes, its differences are marked
    assert [r.published for r in rows] == [63.0, 46.6, None, None, None, None, 5.6, -0.7]
    assert [r.kind for r in rows] == ["figure"] * 6 + ["difference"] * 2
    assert [r.comparable for r in rows] == [True, True] + [False] * 6  # the reference itself: the paper's model
    assert "top 2 layers" in rows[2].differs and "(paper: 50,000 triplets)" in rows[2].differs and first.differs == ""
    assert "80.6 (all-MiniLM-L6-v2 after TripletLoss, 50,000 triplets, 5 epochs, batch 64" in rows[2].differs
    assert {a.config["discount"] for a in arms} == {"none"}  # seed 000's released weighting: what its table measured
    text = table_text([r.__dict__ for r in rows]).splitlines()
    assert len(text) == 1 + len(rows) and "63.50 [62.50, 64.50]" in text[1] and "+5.60" in text[7]
    ours = arms_of({"name": "margins", "data": "/data", "quick": False, "model": "all-MiniLM-L6-v2"})[0].config
    for config, comparable in ((ours, False), ({**margins.PAPER_BUDGET, "top_layers": 0}, True)):
        at = {a.label: Outcome("r", {**a.config, **config}, before, after) for a in arms}
        full = EXPERIMENTS["margins"].rows(at, setup)
        assert all(r.comparable == comparable for r in full[2:]), config  # only the paper's budget compares
        assert comparable or "batch 32 (paper: batch 64)" in full[2].differs
    other = EXPERIMENTS["margins"].rows(outcomes, Setup(quick=True, model="/models/tiny"))
    assert not any(r.comparable for r in other) and all(r.published is None for r in other if r.kind == "figure")


def test_a_quick_reproduction_trains_its_arms_as_runs_and_reports_each_claim(
        stsb_dir, tiny_model_dir, synchronous, capsys):
    code = main(["reproduce", "raoe", "--quick", "--data", str(stsb_dir), "--model", str(tiny_model_dir), "--json"])
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "raoe" and out["quick"] is True
    assert [(r["kind"], r["published"]) for r in out["rows"]] == [("figure", None)] * 4 + [("difference", 6.65)]
    for row in out["rows"]:
        assert set(row) == ROW_KEYS and row["ci_low"] <= row["ours"] <= row["ci_high"] and not row["comparable"]
        assert (row["p_value"] is None) == (row["kind"] == "figure")
    assert "78.99 (BERT-base trained on NLI, STS-B test), not comparable" in out["rows"][1]["differs"]
    store = RunStore()
    (parent,) = store.list(kind="reproduce", with_losses=False)
    children = store.list(sweep_id=parent.id, with_losses=False)
    assert parent.status == "done" and {c.id for c in children} == set(out["runs"].values())
    assert {c.config["recipe"] for c in children} == {"cosent", "angle", "raoe_rank"}
    assert all(c.status == "done" and c.artefacts.get("model") for c in children)
    assert latest(store, "raoe") == (store.get(parent.id), None, None)


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "nope", "--data", "{dir}"], "Unknown reproduction 'nope'"),
    (["reproduce", "", "--data", "{dir}"], "Unknown reproduction ''"),
    (["reproduce", "raoe", "--data", "{dir}/missing"], "does not exist"),
    (["reproduce", "raoe", "--data", "{dir}/stsb.csv"], "--data names a file; give the folder"),
    (["reproduce", "listmle", "--data", "{dir}"], "needs snli.csv"),
    (["reproduce", "raoe", "--quick", "--data", "{dir}", "--model", "{dir}/no-such-model"], "no-such-model"),
    (["reproduce", "raoe", "--data", "{dir}", "--lists-per-step", "1"],
     "--lists-per-step applies to listmle, not raoe"),
    (["reproduce", "ata", "--data", "{dir}", "--select-split", "validation"], "applies to listmle, not ata"),
    *[(["reproduce", "listmle", "--data", "{dir}", "--lists-per-step", bad], "--lists-per-step takes a whole number")
      for bad in ("0", "-1", "abc", "1.5", "nan", "inf", "99999", "", " ", "1e3", "１")],
    *[(["reproduce", "listmle", "--data", "{dir}", "--select-split", bad], "--select-split names a split")
      for bad in ("", "   ", "x" * 41, "val\tid")],
])
def test_a_reproduction_that_cannot_run_is_one_line_and_exit_2(stsb_dir, argv, message, capsys):
    code = main([a.format(dir=stsb_dir) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and message in err and "\n" not in err
    assert RunStore().list(with_losses=False) == []  # nothing was queued


def test_reproductions_page_lists_every_experiment_and_shows_a_finished_one(
        stsb_dir, tiny_model_dir, synchronous, app, capsys):
    assert main(["reproduce", "ata", "--quick", "--data", str(stsb_dir), "--model", str(tiny_model_dir)]) == 0
    capsys.readouterr()
    app.run()
    at = app.switch_page("app_pages/9_Reproductions.py").run()
    no_errors(at)
    assert [h.value for h in at.subheader] == [e.title for e in EXPERIMENTS.values()]
    (table,) = at.table
    frame = table.value
    assert list(frame["published"]) == ["not comparable (see notes)"] * 2 + ["+0.46 (Mistral-7B, MTEB-56 average)"]
    assert frame["ours [95% CI]"].str.contains(r"\[").all() and ", p " in frame["ours [95% CI]"].iloc[2]
    assert "65.87 (Mistral-7B, MTEB-56 average), not comparable" in frame["differs from the paper"].iloc[1]
    starts = [b for b in at.button if b.label.startswith("Run ")]
    assert len(starts) == len(EXPERIMENTS) and all(b.disabled for b in starts)  # no data folder given yet


def test_the_page_starts_a_reproduction_in_the_background(stsb_dir, tiny_model_dir, app, monkeypatch):
    started = []
    monkeypatch.setattr(core.jobs.launch, "start", lambda store, run_id, meet=None: started.append(run_id) or 0)
    app.run()
    at = app.switch_page("app_pages/9_Reproductions.py").run()
    at.text_input(key="reproduce_data").set_value(str(stsb_dir)).run()
    next(b for b in at.button if b.label == "Run raoe").click().run()
    no_errors(at)
    (run,) = RunStore().list(kind="reproduce", with_losses=False)
    assert started == [run.id] and run.config == {"name": "raoe", "data": str(stsb_dir.resolve()), "quick": True,
                                                  "model": str(tiny_model_dir)}
    next(b for b in at.button if b.label == "Run listmle").click().run()  # its files are not in the folder
    assert [e.value for e in at.error] and "needs snli.csv" in at.error[0].value


def test_the_cli_bar_follows_the_arm_that_trains():
    from core.cli.training import progress_run

    store = RunStore()
    parent = store.create("reproduce", {"name": "raoe"})
    child = store.create("train", {"recipe": "cosent"}, sweep_id=parent)
    store.claim(parent, os.getpid())
    store.mark_running(parent, os.getpid())
    assert progress_run(store, store.get(parent)) == (store.get(parent), "")  # no arm yet
    store.set_progress(parent, phase="arm 1/3: CoSENT", current_run=child)
    store.claim(child, os.getpid())
    store.mark_running(child, os.getpid())
    store.set_progress(child, phase="training", step=3, total=10, eta_s=12.0)
    shown, prefix = progress_run(store, store.get(parent))
    assert shown.id == child and prefix == "arm 1/3: CoSENT · " and shown.progress["eta_s"] == 12.0
    store.mark_done(child)
    assert progress_run(store, store.get(parent))[0].id == parent  # between arms: the parent's own phase


def test_the_page_shows_why_the_latest_reproduction_failed(app, tiny_model_dir, stsb_dir):
    store = RunStore()
    run_id = store.create("reproduce", {"name": "raoe", "data": str(stsb_dir), "quick": True})
    store.claim(run_id, os.getpid())
    store.mark_running(run_id, os.getpid())
    store.mark_failed(run_id, "the arm 'CoSENT' (run x) failed: out of memory")
    app.run()
    at = app.switch_page("app_pages/9_Reproductions.py").run()
    assert not at.exception
    assert [e.value for e in at.error] == [f"The latest reproduction `{run_id}` failed: the arm 'CoSENT' (run x) "
                                           "failed: out of memory"]


def test_listmle_claims_are_differences_beside_the_papers_and_its_options_reach_the_arms():
    from core.reproduce import listmle

    setup = Setup(False, "all-MiniLM-L6-v2", lists_per_step=1, select_split="dev")
    arms = {a.label: a.config for a in listmle.arms(Path("/data"), setup)}
    assert arms[listmle.METHOD]["w"] == 0.7 and arms[listmle.MULTI]["w"] == 0.5 and arms[listmle.SCORES]["w"] == 0
    assert all((c["batch_size"], c["examples"], c["select_split"]) == (1, 150, "dev") for c in arms.values())
    quick = listmle.arms(Path("/data"), Setup(True, "all-MiniLM-L6-v2"))
    assert [a.label for a in quick] == [listmle.METHOD] and quick[0].config["batch_size"] == listmle.LISTS_PER_STEP
    assert quick[0].config["select_split"] == "validation"
    metrics = {"sts_spearman": 80.0, "sts_spearman_ci": [79.0, 81.0], "ordering_accuracy": 0.5,
               "ordering_accuracy_ci": [0.45, 0.55]}
    kept = {"best_step": 0, "best": 86.72,
            "points": [{"step": 0, "sts_spearman": 86.72}, {"step": 10, "sts_spearman": 86.6}]}
    outcomes = {label: Outcome("r", {**c, "tau": 1.0}, metrics, metrics, {"selection": kept})
                for label, c in arms.items()}
    rows = listmle.rows(outcomes, setup)
    assert all("kept step 0 of 10: post-training did not help on validation (Spearman 86.72 at step 0" in r.differs
               for r in rows if r.claim.endswith(" - before") or r.claim.startswith("STS Spearman after"))
    assert not any(r.comparable for r in rows)  # BERT-base, average of 7 STS tasks: never ours
    assert all(r.published is None for r in rows if r.kind == "figure")
    assert any("81.17 (SynCSE-r, BERT-base, average of 7 STS tasks), not comparable" in r.differs for r in rows)
    before = next(r for r in rows if r.claim == "STS Spearman before post-training")  # 80.13 is SynCSE*, not -r
    assert "paper: 80.13 (SynCSE* before post-training, BERT-base" in before.differs
    assert "SynCSE-r" not in before.differs
    differences = {r.claim: (r.published, r.setting) for r in rows if r.kind == "difference" and r.published}
    assert differences == {
        f"STS Spearman: {listmle.METHOD} - before": (1.04, "SynCSE* -> SynCSE-r, BERT-base, average of 7 STS tasks"),
        f"STS Spearman: {listmle.MULTI} - before": (0.72, "MultiCSR -> MultiCSR-r, BERT-base, average of 7 STS tasks"),
        f"STS Spearman: {listmle.MULTI} - {listmle.SCORES}": (0.15, listmle.MULTICSR),
        f"STS Spearman: {listmle.MULTI} - {listmle.ORDER}": (0.68, listmle.MULTICSR)}
    assert all("MultiCSR" not in r.setting for r in rows if r.claim.startswith(f"STS Spearman: {listmle.METHOD}"))


def test_one_list_per_step_is_a_batch_of_one_which_only_a_list_recipe_takes():
    from core.training.config import TrainConfig

    assert TrainConfig.from_dict({"corpus": "x.csv", "recipe": "listmle", "batch_size": 1}).batch_size == 1
    for recipe in ("triplet", "mnrl", "cosent", "raoe"):
        with pytest.raises(UserError, match=f"batch_size must be at least 2 for {recipe}"):
            TrainConfig.from_dict({"corpus": "x.csv", "recipe": recipe, "batch_size": 1})


@pytest.mark.parametrize("as_json", [False, True])
def test_a_reproduction_cancelled_after_an_arm_prints_what_finished(as_json, stsb_dir, tiny_model_dir, synchronous,
                                                                    monkeypatch, capsys):
    """It printed nothing of its finished arms (nothing at all with --json) (issue 33)."""
    import core.reproduce.job as job

    real = job.run_arms
    stops = iter([False, True])

    def after_one_arm(store, parent_id, arms, progress=None, should_stop=lambda: False):
        return real(store, parent_id, arms, progress, lambda: next(stops, True))

    monkeypatch.setattr(job, "run_arms", after_one_arm)
    argv = ["reproduce", "raoe", "--quick", "--data", str(stsb_dir), "--model", str(tiny_model_dir)]
    assert main(argv + (["--json"] if as_json else [])) == 130
    out = capsys.readouterr().out
    if as_json:
        result = json.loads(out)
        assert result["status"] == "cancelled" and len(result["arms"]) == 1
        (arm,) = result["arms"]
        assert arm["status"] == "done" and arm["after"]["sts_spearman"] is not None
    else:
        lines = out.strip().splitlines()
        assert lines[0].endswith(" cancelled") and "STS Spearman" in lines[1]
        assert lines[-1].strip().startswith("2 of 3 arms cancelled or not started")


def test_a_data_file_with_other_columns_is_refused_before_a_run_naming_what_the_experiment_reads(
        stsb_dir, tiny_model_dir, capsys):
    """It started a run that failed with "pass --text-col NAME", a flag reproduce does not have (issue 33)."""
    (stsb_dir / "stsb.csv").write_text("a,b,c\n" + "".join(f"x {i},y {i},{i}\n" for i in range(60)))
    assert main(["reproduce", "raoe", "--quick", "--data", str(stsb_dir), "--model", str(tiny_model_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--text-col" not in err and "--label-col" not in err, err
    assert f"cannot use {stsb_dir / 'stsb.csv'}" in err and "it reads stsb.csv as text1, text2, score, split" in err
    assert RunStore().list() == []


def test_a_data_file_too_small_for_the_bands_is_refused_before_a_run(tmp_path, tiny_model_dir, capsys):
    """It was caught only at mining, after the reference had encoded the corpus in a queued run (issue 33)."""
    rows = [{"text": f"question {i} about thing {i % 7}", "label": f"c{i % 3}", "split": "test" if i % 5 == 0 else
             "train"} for i in range(90)]  # 72 training texts: at most 48 of other labels, N4 ends at rank 100
    pd.DataFrame(rows).to_csv(tmp_path / "trec.csv", index=False)
    assert main(["reproduce", "mgh", "--quick", "--data", str(tmp_path), "--model", str(tiny_model_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"cannot use {tmp_path / 'trec.csv'} for its arm" in err, err
    assert "too small for the bands 5,20,50,100" in err and "more than 48 other-label texts" in err
    assert RunStore().list() == []


def test_a_data_file_without_the_split_its_figures_are_named_after_is_refused(tmp_path, tiny_model_dir, capsys):
    """Issue 51: `reproduce margins` on an sst2.csv without a split column labelled figures from a 10 % hold-out of
    training rows "SST-2 validation", without a word."""
    rows = [{"sentence": f"a {'good' if i % 2 else 'bad'} film, number {i}", "label": i % 2} for i in range(200)]
    pd.DataFrame(rows).to_csv(tmp_path / "sst2.csv", index=False)
    assert main(["reproduce", "margins", "--quick", "--data", str(tmp_path), "--model", str(tiny_model_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: reproduce margins scores its arms on the validation rows of sst2.csv (text, label, split "
                   "with train and validation rows), but this file's targets are holdout rows (stratified 90:10, seed "
                   "0), which its figures would be named after; give sst2.csv a split column with validation rows.")
    assert RunStore().list() == []


def test_data_given_as_a_file_says_to_give_its_folder(stsb_dir, tiny_model_dir, capsys):
    assert main(["reproduce", "raoe", "--quick", "--data", str(stsb_dir / "stsb.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --data names a file; give the folder that holds stsb.csv: {stsb_dir}."


def test_raoe_stage_2_against_cosent_is_a_row_only_where_the_losses_differ():
    """At I_eff < 1 L_rank keeps exactly CoSENT's pairs, so the two arms train the same loss: a row comparing them
    would read as a test it is not (issue 53). At a batch of 256 (I_eff = 1) it is a comparison again."""
    from core.reproduce import raoe

    metrics = {"sts_spearman": 80.0, "sts_spearman_ci": [79.0, 81.0]}
    for batch, shown in ((32, False), (256, True)):
        arms = raoe.arms(Path("/data"), Setup(True, "m"))
        outcomes = {a.label: Outcome("r", {**a.config, "interval": 2, "batch_size": batch}, metrics, metrics)
                    for a in arms}
        claims = [r.claim for r in raoe.rows(outcomes, Setup(True, "m"))]
        assert ("STS-B Spearman: RAOE stage 2 (L_rank) - CoSENT" in claims) == shown, batch
