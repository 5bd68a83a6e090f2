"""ListMLE post-training (seed 003; docs/definitions.md, ListMLE post-training): does nudging a teacher's
similarities toward NLI list order teach all-MiniLM-L6-v2 that order, and what does it cost general similarity?

Lists come from SNLI (core.data.lists.nli_lists: premise; entailment > neutral > contradiction > another premise's
hypothesis): its validation split trains (SNLI has no train rows here), its test-split lists are scored. Every arm
is a fresh copy of the same loaded all-MiniLM-L6-v2, trained through core.training.trainer.make_trainer with the
listmle recipe's examples and loss, as a run would, on the same lists with the same budget (16 lists per step,
150 steps, seed 0, the project's default learning rate):

- w = 0: the teacher's own order as the target (the model sharpens what it already believes);
- w = 0.5: the teacher's similarities nudged toward the list order (the method);
- w = 2: a stronger nudge (at w <= 0.5 the nudge cannot reverse two neighbours the teacher swaps; see the docs);
- target = order: the list order alone, no teacher (the paper's order-only ablation);
- w = 0.5 with all-mpnet-base-v2 as the teacher, when `make mpnet` has installed it.

Reported for the base model and after each arm: ordering accuracy and Kendall tau on the test lists, STS-B test
Spearman (did post-training on lists hurt general similarity?), the change from the base model measured in the same
run, and training wall time with its ratio to the w = 0 arm. Whatever comes out is printed as it is.
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    REPO,
    Options,
    data_file,
    header,
    line,
    load_minilm,
    load_note,
    ratio,
    set_seeds,
)

BATCH = 16  # lists per optimiser step
STEPS = 150
QUICK_STEPS = 10
QUICK_EVAL_LISTS = 200
QUICK_STS_PAIRS = 300
MPNET = REPO / "models" / "all-mpnet-base-v2"  # `make mpnet` puts it here
ARMS = (  # (label, the listmle recipe's settings)
    ("w = 0 (teacher order)", {"w": 0.0}),
    ("w = 0.5 (nudged)", {"w": 0.5}),
    ("w = 2 (strong nudge)", {"w": 2.0}),
    ("target = order (list order only)", {"target": "order"}),
)
MPNET_ARM = ("w = 0.5, mpnet teacher", {"w": 0.5, "teacher": str(MPNET)})
# The paper's figures (BERT-base, average of 7 STS tasks): context for the trend, not a target.
PUBLISHED = "SynCSE 80.13 -> 81.17, MultiCSR 80.61 -> 81.33; order only 80.65 (avg of 7 STS tasks, BERT-base)"


def _corpora(quick: bool):
    """SNLI lists (train: validation split; test: test split, --quick: a seeded subsample) and STS-B (--quick: a
    seeded subsample of its test pairs)."""
    from core.data.lists import ListSplit, nli_lists
    from core.data.pairs import PairSplit, load_pairs

    lists = nli_lists(load_pairs(data_file("snli.csv")), seed=0)
    stsb = load_pairs(data_file("stsb.csv"))
    if quick:
        rng = np.random.default_rng(0)
        rows = np.sort(rng.choice(len(lists.test), min(QUICK_EVAL_LISTS, len(lists.test)), replace=False))
        lists = dataclasses.replace(lists, test=ListSplit(ids=[lists.test.ids[i] for i in rows],
                                                          lists=[lists.test.lists[i] for i in rows]))
        test = stsb.test
        rows = np.sort(rng.choice(len(test), min(QUICK_STS_PAIRS, len(test)), replace=False))
        stsb = dataclasses.replace(stsb, test=PairSplit(
            text1=[test.text1[i] for i in rows], text2=[test.text2[i] for i in rows], scores=test.scores[rows],
            labels=test.labels[rows]))
    return lists, stsb


def _scores(model, lists, stsb) -> dict:
    from core.evaluation.ordering import ordering_metrics
    from core.evaluation.sts import sts_spearman

    return {**ordering_metrics(model, lists), "sts_spearman": sts_spearman(model, stsb)}


def _train_arm(base, reference, lists, settings: dict, steps: int, out_dir: Path) -> dict:
    """One arm: the listmle recipe's examples and loss on a fresh copy of ``base``; the trained model and timings."""
    from core.training.config import TrainConfig
    from core.training.recipes import get_recipe
    from core.training.trainer import SilentReporter, make_trainer

    recipe = get_recipe("listmle")
    cfg = TrainConfig(corpus=str(data_file("snli.csv")), recipe="listmle", examples=steps * BATCH, epochs=1.0,
                      max_steps=steps, batch_size=BATCH, seed=0, device="cpu", **settings)
    recipe.check_corpus(cfg, lists)
    t0 = time.perf_counter()
    dataset, stats = recipe.build_examples(cfg, lists, reference)  # the teacher's encodings happen here
    examples_s = time.perf_counter() - t0
    set_seeds()
    model = copy.deepcopy(base)  # same initial weights every arm; the copy is not timed
    model.train()
    trainer = make_trainer(cfg, model, recipe.build_loss(model, cfg), dataset, out_dir, SilentReporter())
    t0 = time.perf_counter()
    out = trainer.train()
    wall = time.perf_counter() - t0
    model.eval()
    return {"model": model, "wall": wall, "examples_s": examples_s, "steps": int(out.global_step),
            "loss": float(out.training_loss), "stats": stats, "anchors": list(dataset["m0"])}


def run(opts: Options) -> None:
    from core.evaluation.headline import HEADLINE

    metric = {m.key: m for m in HEADLINE}
    set_seeds()
    steps = QUICK_STEPS if opts.quick else STEPS
    base = load_minilm()
    base.eval()
    reference = copy.deepcopy(base)  # the frozen teacher; base itself is only ever copied
    reference.requires_grad_(False)
    lists, stsb = _corpora(opts.quick)
    mpnet = (MPNET / "modules.json").is_file()
    arms = (*ARMS, MPNET_ARM) if mpnet else ARMS
    before = _scores(base, lists, stsb)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-listmle-") as tmp:
        tmp = Path(tmp)
        # untimed: lazy imports, thread pools and allocator warm up on two steps before the first timed arm
        _train_arm(base, reference, lists, ARMS[0][1], 2, tmp / "warm")
        for i, (label, settings) in enumerate(arms):
            result = _train_arm(base, reference, lists, settings, steps, tmp / f"arm-{i}")
            result.update(_scores(result.pop("model"), lists, stsb))
            results[label] = result

    first = results[ARMS[0][0]]
    header("listmle: ListMLE post-training on SNLI lists, ordering on SNLI test lists and STS-B test Spearman "
           "(seed 003)",
           f"all-MiniLM-L6-v2, {first['stats']['examples']} training lists of {lists.train.sizes[0]} (SNLI "
           f"validation) per arm, {BATCH} lists per step, {first['steps']} steps, lr 3e-5 (default), tau 0.05, "
           f"seed 0, CPU; {before['n_lists']} SNLI test lists{' (seeded subsample)' if opts.quick else ''}, "
           f"{len(stsb.test)} STS-B test pairs{' (seeded subsample)' if opts.quick else ''}")

    def scores(r: dict, delta: bool) -> str:
        return ", ".join(
            f"{short} {metric[key].text(r[key])}" + (f" ({metric[key].text(r[key] - before[key], sign=True)})"
                                                     if delta else "")
            for short, key in (("order acc", "ordering_accuracy"), ("tau", "kendall_tau"), ("STS", "sts_spearman")))

    line("base model (no training)", scores(before, delta=False))
    print("   after each arm (change from the base model in brackets)")
    for label, _settings in arms:
        r = results[label]
        line(label, f"{scores(r, delta=True)}; train {r['wall']:.1f} s (x{ratio(r['wall'], first['wall'])}), "
                    f"loss {r['loss']:.4f}")
    if not mpnet:
        line(MPNET_ARM[0], f"skipped: not installed ({MPNET.relative_to(REPO)}; `make mpnet`)")
    line("same training lists in every arm",
         "yes" if all(r["anchors"] == first["anchors"] for r in results.values()) else "NO")
    line("teacher already in list order", f"all-MiniLM-L6-v2 {first['stats']['teacher_in_order']:.1%}"
         + (f", all-mpnet-base-v2 {results[MPNET_ARM[0]]['stats']['teacher_in_order']:.1%}" if mpnet else "")
         + " (share of the training lists whose anchor cosines follow the list order strictly)")
    line("target already in list order", ", ".join(f"{label} {r['stats']['target_in_order']:.1%}"
                                                    for label, r in results.items())
         + " (the same share for each arm's ListMLE target: how much the nudge reorders)")
    line("published (seed 003)", PUBLISHED)
    line("timed", "trainer.train() wall time per arm; arms run one after another, " + load_note())
    line("building the examples (untimed)",
         ", ".join(f"{label} {r['examples_s']:.1f} s" for label, r in results.items())
         + " (the teacher's encodings: from the disk cache after the first arm with that teacher)")
