"""Training-loop overhead: our trainer vs a bare SentenceTransformerTrainer.

Ours: core.training.trainer.make_trainer with our progress / ETA / cancel callback attached (no-op reporter).
Baseline: a SentenceTransformerTrainer built here directly, with the same model initialisation (a copy of
one loaded model), the same mined triplets, the same TripletLoss and the same training arguments,
evaluation off. Both runs must do the same work (same final loss); the ratio bare/ours is the share of
speed we keep (aim >= 0.95).
"""

from __future__ import annotations

import copy
import math
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Options, header, line, load_minilm, load_note, runs_note, set_seeds, sst2_texts

BATCH = 32
LR = 3e-5
WARMUP = 0.1
COMPARED_ARGS = ("num_train_epochs", "max_steps", "per_device_train_batch_size", "learning_rate", "warmup_steps",
                 "seed", "data_seed", "batch_sampler", "logging_steps", "save_strategy", "report_to",
                 "disable_tqdm", "dataloader_num_workers", "dataloader_pin_memory", "fp16", "bf16", "eval_strategy",
                 "gradient_accumulation_steps", "lr_scheduler_type", "optim", "weight_decay")


def bare_trainer(model, loss, dataset, out_dir: Path):
    """What a user would write with sentence-transformers alone, using the same settings as ours."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from transformers import PrinterCallback

    total = math.ceil(len(dataset) / BATCH)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out_dir), num_train_epochs=1.0, max_steps=-1, per_device_train_batch_size=BATCH,
        learning_rate=LR, warmup_steps=int(WARMUP * total), seed=0, data_seed=0,
        batch_sampler=BatchSamplers.BATCH_SAMPLER, logging_steps=max(1, min(10, total // 20)),
        save_strategy="no", report_to="none", disable_tqdm=True, dataloader_num_workers=0,
        dataloader_pin_memory=str(model.device).startswith("cuda"),
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss)
    trainer.remove_callback(PrinterCallback)  # keeps stdout clean; ours removes it too
    return trainer


def run(opts: Options) -> None:
    from core.data.mining import MiningSettings, mine
    from core.training.config import TrainConfig
    from core.training.recipes import get_recipe
    from core.training.trainer import SilentReporter, make_trainer

    set_seeds()
    n_examples = 96 if opts.quick else 600
    repeats = 2 if opts.quick else 4
    base = load_minilm()
    texts, labels = sst2_texts(1500 if opts.quick else 5000)
    examples = mine(base, texts, np.asarray(labels), "triplet",
                    MiningSettings(k=5, threshold=0.5, max_examples=n_examples, seed=0))
    dataset = examples.to_dataset()
    recipe = get_recipe("triplet")
    cfg = TrainConfig(corpus="sst2.csv", recipe="triplet", margin=0.1, distance="cosine", examples=n_examples,
                      epochs=1.0, batch_size=BATCH, lr=LR, warmup_ratio=WARMUP, seed=0, device="cpu")
    tmp = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    losses: dict[str, list[float]] = {"ours": [], "bare": []}
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    arg_mismatch: list[str] = []

    def one(arm: str, data, record: bool = True) -> None:
        set_seeds()
        model = copy.deepcopy(base)  # same initial weights every run, load time not counted
        model.train()
        loss = recipe.build_loss(model, cfg)
        t0 = time.perf_counter()
        if arm == "ours":
            trainer = make_trainer(cfg, model, loss, data, tmp / arm, SilentReporter())
        else:
            trainer = bare_trainer(model, loss, data, tmp / arm)
        out = trainer.train()
        elapsed = time.perf_counter() - t0
        if record:
            times[arm].append(elapsed)
            losses[arm].append(float(out.training_loss))
        else:
            trainer_args[arm] = trainer.args

    trainer_args: dict[str, object] = {}
    warm = dataset.select(range(min(len(dataset), 2 * BATCH)))  # untimed: lazy imports, thread pools
    one("ours", warm, record=False)
    one("bare", warm, record=False)
    for name in COMPARED_ARGS:
        a, b = getattr(trainer_args["ours"], name, None), getattr(trainer_args["bare"], name, None)
        if a != b:
            arg_mismatch.append(f"{name}: ours {a!r}, bare {b!r}")
    budget_s = 120 if opts.quick else 420
    start = time.perf_counter()
    rounds = 0
    try:
        for r in range(repeats):  # A B, B A, ...: drift in machine load hits both arms alike
            t_round = time.perf_counter()
            for arm in (("ours", "bare") if r % 2 == 0 else ("bare", "ours")):
                one(arm, dataset)
            rounds += 1
            now = time.perf_counter()
            if (now - start) + (now - t_round) > budget_s:  # the next round would likely end past the budget
                break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = {arm: float(np.median(ts)) for arm, ts in times.items()}
    steps = math.ceil(len(dataset) / BATCH)
    header("overhead: our training path vs a bare SentenceTransformerTrainer",
           f"all-MiniLM-L6-v2, {len(dataset)} mined SST-2 triplets, TripletLoss (cosine, margin 0.1), "
           f"batch {BATCH}, {steps} steps, CPU, evaluation off, median of {rounds} interleaved repeats, {load_note()}")
    line("ours (make_trainer + callback)", f"{med['ours']:.2f} s  ({len(dataset) / med['ours']:.1f} examples/s)")
    line("bare SentenceTransformerTrainer", f"{med['bare']:.2f} s  ({len(dataset) / med['bare']:.1f} examples/s)")
    line("all runs (s, in order)", runs_note(times))
    line("ratio bare / ours (time)", f"{med['bare'] / med['ours']:.2f}  (aim >= 0.95)")
    same_loss = max(abs(a - b) for a, b in zip(losses["ours"], losses["bare"])) < 1e-6
    line("same work (equal training loss)",
         f"{'yes' if same_loss else 'NO'} (ours {losses['ours'][0]:.6f}, bare {losses['bare'][0]:.6f})")
    line("same training arguments", "yes" if not arg_mismatch else "NO: " + "; ".join(arg_mismatch))
