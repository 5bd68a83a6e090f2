"""RAOE (seed 001; docs/definitions.md, RAOE): CoSENT, AnglE and RAOE with its ablations, scored on STS-B test.

all-MiniLM-L6-v2, every arm a fresh copy of the same loaded model, trained through
core.training.trainer.make_trainer with its recipe's examples and loss, the same seed and budget (1 epoch,
batch 32, the project's default learning rate). Two stages, as in the paper:

- stage-2 analogue: STS-B train pairs with the gold score as the teacher's s. STS-B has no NLI label, so every
  pair has the same l, L_angle gates no pair and "RAOE full" must equal "L_rank only" (printed as a check).
- stage-1 analogue: SNLI validation pairs, l = entailment 0 < neutral 1 < contradiction 2 and s = the reference
  model's cosine; full loss, its two single-term ablations and the gate on labels alone.

The baseline is the reference model itself (no training) and, for time, the CoSENT arm. Whatever comes out is
printed as it is.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    REPO,
    Options,
    data_file,
    header,
    interleaved,
    line,
    load_minilm,
    load_note,
    ratio,
    runs_note,
    set_seeds,
)

BATCH = 32
STAGE2 = (  # (label, recipe, its settings): STS-B train, the gold score as s
    ("CoSENT (scale 20)", "cosent", {"margin": 20.0}),
    ("AnglE (scale 20)", "angle", {"margin": 20.0}),
    ("RAOE L_rank only (I = 2, I_eff 0.125)", "raoe_rank", {"teacher": "score", "interval": 2}),
    ("RAOE L_rank only (I = 32, I_eff 2)", "raoe_rank", {"teacher": "score", "interval": 32}),  # the old I = 2
    ("RAOE full", "raoe", {"teacher": "score"}),
)
STAGE1 = (  # SNLI validation, the reference model's cosine as s, the NLI label as l
    ("RAOE full", "raoe", {"teacher": "reference"}),
    ("RAOE L_rank only (I = 2, I_eff 0.125)", "raoe_rank", {"teacher": "reference", "interval": 2}),
    ("RAOE L_angle only", "raoe_angle", {"teacher": "reference"}),
    ("RAOE gate on labels only", "raoe", {"teacher": "reference", "gate": "label"}),
)
MPNET = REPO / "models" / "all-mpnet-base-v2"  # `make mpnet` puts it here: a teacher that is not the student
MPNET_ARM = ("RAOE full, all-mpnet-base-v2 teacher", "raoe", {"teacher": str(MPNET)})
# The paper's ablations (BERT-base, average of 7 STS tasks): context for the trend, not a target.
PUBLISHED = {"full": 85.11, "L_rank only": 84.31, "L_angle only": 84.02, "gate on s only": 84.30,
             "gate on l only": 76.79}


def _step_timer():
    """A trainer callback that keeps the seconds of each optimiser step (forward, backward, update)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[float] = []
            self._t0 = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.append(time.perf_counter() - self._t0)

    return StepTimer()


def _sts_corpora(quick: bool):
    """STS-B (train / test; --quick: a seeded 300-pair test subsample) and SNLI with its validation pairs as the
    train split (its test pairs stay the target and are not used)."""
    import pandas as pd

    from core.data.pairs import PairSplit, build_pairs, detect_pair_columns, load_pairs

    stsb = load_pairs(data_file("stsb.csv"))
    if quick:
        test = stsb.test
        rows = np.sort(np.random.default_rng(0).choice(len(test), min(300, len(test)), replace=False))
        stsb = dataclasses.replace(stsb, test=PairSplit(
            text1=[test.text1[i] for i in rows], text2=[test.text2[i] for i in rows], scores=test.scores[rows],
            labels=test.labels[rows]))
    df = pd.read_csv(data_file("snli.csv"))
    df["split"] = df["split"].replace({"validation": "train"})
    snli = build_pairs(df, detect_pair_columns(df), name="snli-validation")
    return stsb, snli


def _train_arm(base, reference, corpus, corpus_path: Path, recipe_name: str, settings: dict, n_examples: int,
               out_dir: Path) -> dict:
    """One arm: the recipe's examples and loss on a fresh copy of ``base``; the trained model and its timings."""
    from core.training.config import TrainConfig
    from core.training.recipes import get_recipe
    from core.training.trainer import SilentReporter, make_trainer

    recipe = get_recipe(recipe_name)
    cfg = TrainConfig(corpus=str(corpus_path), recipe=recipe_name, examples=n_examples, epochs=1.0,
                      batch_size=BATCH, seed=0, device="cpu", **settings)
    recipe.check_corpus(cfg, corpus)
    dataset, stats = recipe.build_examples(cfg, corpus, reference)
    set_seeds()
    model = copy.deepcopy(base)  # same initial weights every arm; the copy is not timed
    model.train()
    trainer = make_trainer(cfg, model, recipe.build_loss(model, cfg), dataset, out_dir, SilentReporter())
    timer = _step_timer()
    trainer.add_callback(timer)
    t0 = time.perf_counter()
    out = trainer.train()
    wall = time.perf_counter() - t0
    model.eval()
    return {"model": model, "wall": wall, "steps": timer.steps, "loss": float(out.training_loss), "stats": stats,
            "pairs": (list(dataset["sentence1"]), list(dataset["sentence2"]))}


def _loss_times(model, quick: bool) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Median seconds of one loss forward + backward from a batch of embeddings, per loss, interleaved: the only
    work that differs between the arms, which the encoder's share of a training step hides."""
    import torch
    from sentence_transformers.sentence_transformer.losses import AnglELoss, CoSENTLoss

    from core.losses.raoe import RAOELoss

    generator = torch.Generator().manual_seed(0)
    dim = model.get_embedding_dimension()
    first, second = (torch.randn(BATCH, dim, generator=generator, requires_grad=True) for _ in range(2))
    scores = torch.rand(BATCH, generator=generator)
    labels = torch.stack((scores, torch.randint(0, 3, (BATCH,), generator=generator).float()), dim=1)
    losses = {"CoSENT": (CoSENTLoss(model, scale=20.0), scores), "AnglE": (AnglELoss(model, scale=20.0), scores),
              "RAOE full": (RAOELoss(model), labels), "RAOE L_rank": (RAOELoss(model, w_angle=0.0), labels),
              "RAOE L_angle": (RAOELoss(model, interval=0, w_rank=0.0), labels),
              "RAOE gate label": (RAOELoss(model, gate="label"), labels)}
    calls = 50 if quick else 200

    def arm(loss, target):
        def go() -> None:
            for _ in range(calls):
                loss.compute_loss_from_embeddings([first, second], target).backward()
        return go

    med, times = interleaved({name: arm(*pair) for name, pair in losses.items()}, repeats=5 if quick else 9,
                             warmup={name: arm(*pair) for name, pair in losses.items()}, budget_s=30 if quick else 60)
    return ({name: t / calls for name, t in med.items()},
            {name: [t / calls for t in ts] for name, ts in times.items()})


def _same_pairs(results: dict, stage: int, arms: tuple) -> bool:
    """Every arm of a stage trained on the same pairs (each recipe subsamples with the same seed)."""
    first = results[(stage, arms[0][0])]["pairs"]
    return all(results[(stage, label)]["pairs"] == first for label, _recipe, _settings in arms)


def run(opts: Options) -> None:
    from core.evaluation.sts import sts_spearman

    set_seeds()
    n_examples = 200 if opts.quick else 2000
    base = load_minilm()
    base.eval()
    reference = copy.deepcopy(base)  # the frozen teacher of stage 1; base itself is only ever copied
    reference.requires_grad_(False)
    stsb, snli = _sts_corpora(opts.quick)
    before = sts_spearman(base, stsb)
    results: dict[tuple[int, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-raoe-") as tmp:
        tmp = Path(tmp)
        # untimed: lazy imports, thread pools and allocator warm up on two batches before the first timed arm
        _train_arm(base, reference, stsb, data_file("stsb.csv"), "cosent", {"margin": 20.0}, 2 * BATCH, tmp / "warm")
        stage1_arms = (*STAGE1, MPNET_ARM) if (MPNET / "modules.json").is_file() else STAGE1
        for stage, arms, corpus, path in ((2, STAGE2, stsb, data_file("stsb.csv")),
                                          (1, stage1_arms, snli, data_file("snli.csv"))):
            for label, recipe_name, settings in arms:
                result = _train_arm(base, reference, corpus, path, recipe_name, settings, n_examples,
                                    tmp / f"{stage}-{recipe_name}-{len(results)}")
                result["spearman"] = sts_spearman(result.pop("model"), stsb)
                results[(stage, label)] = result

    cosent = results[(2, STAGE2[0][0])]
    cosent_step = statistics.median(cosent["steps"])

    def show(stage: int, label: str) -> None:
        r = results[(stage, label)]
        step = statistics.median(r["steps"])
        line(label, f"{r['spearman']:.2f}  ({r['spearman'] - before:+.2f})   train {r['wall']:.1f} s "
                    f"(x{ratio(r['wall'], cosent['wall'])}), median step {step * 1000:.0f} ms "
                    f"(x{ratio(step, cosent_step)}), loss {r['loss']:.4f}")

    n_steps = len(cosent["steps"])
    header("raoe: CoSENT, AnglE and RAOE ablations, STS-B test Spearman x 100 (seed 001)",
           f"all-MiniLM-L6-v2, {cosent['stats']['examples']} training pairs per arm, 1 epoch ({n_steps} steps), "
           f"batch {BATCH}, lr 3e-5 (default), seed 0, CPU; STS-B test: {len(stsb.test)} pairs"
           f"{' (seeded subsample)' if opts.quick else ''}")
    line("reference (no training)", f"{before:.2f}")
    print("   stage-2 analogue: STS-B train pairs, s = gold score (change from the reference in brackets)")
    for label, _recipe, _settings in STAGE2:
        show(2, label)
    line("same training pairs in every arm", "yes" if _same_pairs(results, 2, STAGE2) else "NO")
    full, rank = results[(2, "RAOE full")], results[(2, "RAOE L_rank only (I = 2, I_eff 0.125)")]
    line("full = L_rank only (no labels)",
         f"{'yes' if abs(full['spearman'] - rank['spearman']) < 1e-6 and full['loss'] == rank['loss'] else 'NO'} "
         f"(no pair is label-ordered, so L_angle gates none)")
    cosent_like = abs(rank["spearman"] - cosent["spearman"]) < 1e-6
    line("L_rank at I_eff < 1 = CoSENT", f"{'yes' if cosent_like else 'no'} (equal only without tied scores: RAOE "
                                         "ranks tied s by position, CoSENT leaves tied pairs out)")

    stage1 = results[(1, "RAOE full")]
    share = stage1["stats"]["gated_share"]
    print(f"   stage-1 analogue: SNLI validation pairs (labels E/N/C as l), s = reference cosine; gated share of "
          f"the training pairs {share if share is None else f'{share:.3f}'} "
          f"(l_i > l_j pairs whose s agrees)")
    for label, _recipe, _settings in stage1_arms:
        show(1, label)
    line("same training pairs in every arm", "yes" if _same_pairs(results, 1, stage1_arms) else "NO")
    if MPNET_ARM not in stage1_arms:
        line(MPNET_ARM[0], f"skipped: not installed ({MPNET.relative_to(REPO)}; `make mpnet`)")
    gated, label_only = stage1["spearman"], results[(1, "RAOE gate on labels only")]["spearman"]
    line("full beats gate on labels only", f"{'yes' if gated > label_only else 'no'} "
                                           f"({gated - label_only:+.2f}; published "
                                           f"{PUBLISHED['full'] - PUBLISHED['gate on l only']:+.2f})")
    line("published ablations (BERT-base)", ", ".join(f"{k} {v:.2f}" for k, v in PUBLISHED.items())
         + " (avg of 7 STS tasks, full training)")
    line("timed", "trainer.train() wall time per arm, and the median of its optimiser steps (forward + backward "
                  "+ update); ratios are to CoSENT's (stage 1 trains on SNLI's sentences, not STS-B's); "
                  f"arms run one after another, {load_note()}")
    per_loss, loss_runs = _loss_times(base, opts.quick)
    print(f"   the loss alone: forward + backward from a batch of {BATCH} embedding pairs, median of interleaved "
          f"rounds ({len(loss_runs['CoSENT'])}), {load_note()}")
    for name, seconds in per_loss.items():
        line(name, f"{seconds * 1e6:.0f} us  (x{ratio(seconds, per_loss['CoSENT'])} CoSENT)")
    line("all rounds (us per call)", runs_note(loss_runs, unit=1e6, fmt="{:.0f}"))
