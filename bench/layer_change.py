"""Which layers change when all-MiniLM-L6-v2 is fine-tuned (seed 002's claim that the last layers change most;
docs/definitions.md, Which layers changed): linear CKA per layer between the reference and the fine-tuned model's
mean-pooled hidden states (1.0 = unchanged), beside each layer's kNN accuracy before and after.

Two runs, each a fresh copy of the model trained through core.training.trainer.make_trainer with its recipe's
examples and loss (as a run would, without the run's own P@k / S@k evaluations: compare_layers already gives every
layer's kNN, the last layer's being the model's own under the cosine layer metric), then
core.evaluation.evaluate.compare_layers on the corpus the run trained on (its kNN train sample and test texts, the
states the Layers page uses; on BBC News a seeded 600 of the train documents, as they are long):

(a) supervised: TripletLoss (cosine distance, margin 0.1) on 2,000 mined SST-2 triplets, 1 epoch, batch 32;
(b) self-supervised: crop pairs (two different 2-sentence chunks of one document) from the BBC News train documents,
    MNRL scale 20, 100 batches of 32, starting from all-MiniLM-L6-v2.

The answer to "does the last layer change most?" is computed from the CKA values (the lowest), not asserted.
Whatever comes out is printed as it is.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from pathlib import Path

from bench.common import Options, data_file, header, line, load_minilm, load_note, set_seeds

BATCH = 32
TRIPLETS, QUICK_TRIPLETS = 2000, 300
CROP_STEPS, QUICK_CROP_STEPS = 100, 10
QUICK_SST2 = (3000, 200)  # --quick: seeded SST-2 train rows, first validation rows
QUICK_BBC = 300  # --quick: seeded BBC News documents (split stratified as usual)
SST2_KNN_MAX = 10_000  # kNN train sample (and CKA texts) per layer: the evaluation's default
BBC_KNN_MAX = 600  # BBC documents are long (256 tokens each): a seeded sample keeps the layer passes short


def _quick_sst2(folder: Path) -> Path:
    import pandas as pd

    df = pd.read_csv(data_file("sst2.csv"))
    train = df[df["split"] == "train"].sample(n=QUICK_SST2[0], random_state=0)
    val = df[df["split"] == "validation"].head(QUICK_SST2[1])
    path = folder / "sst2_quick.csv"
    pd.concat([train, val]).to_csv(path, index=False)
    return path


def _quick_bbc(folder: Path) -> Path:
    import pandas as pd

    path = folder / "bbc_quick.csv"
    pd.read_csv(data_file("bbc_news.csv")).sample(n=QUICK_BBC, random_state=0).to_csv(path, index=False)
    return path


def _layer_run(name: str, cfg_settings: dict, knn_train_max: int, work: Path) -> dict:
    """Train a fresh all-MiniLM-L6-v2 with the recipe's examples and loss, then compare every layer with the
    untouched reference's (compare_layers also gives each layer's kNN, the last layer's being the model's own)."""
    from core.data.corpus import load_corpus
    from core.evaluation.evaluate import EvalSettings, compare_layers
    from core.training.config import TrainConfig
    from core.training.recipes import get_recipe
    from core.training.trainer import SilentReporter, make_trainer

    cfg = TrainConfig(batch_size=BATCH, seed=0, device="cpu", **cfg_settings)
    recipe = get_recipe(cfg.recipe)
    corpus = load_corpus(cfg.corpus)
    recipe.check_corpus(cfg, corpus)
    reference = load_minilm()
    reference.eval()
    reference.requires_grad_(False)
    t0 = time.perf_counter()
    dataset, stats = recipe.build_examples(cfg, corpus, reference)
    examples_s = time.perf_counter() - t0
    set_seeds()
    model = copy.deepcopy(reference).requires_grad_(True)
    model.train()
    trainer = make_trainer(cfg, model, recipe.build_loss(model, cfg), dataset, work / name, SilentReporter())
    t0 = time.perf_counter()
    out = trainer.train()
    train_s = time.perf_counter() - t0
    model.eval()
    settings = EvalSettings(knn_train_max=knn_train_max)
    t0 = time.perf_counter()
    layers = compare_layers(reference, model, corpus, settings)
    return {"cfg": cfg, "stats": stats, "steps": int(out.global_step), "loss": float(out.training_loss),
            "layers": layers, "examples_s": examples_s, "train_s": train_s, "compare_s": time.perf_counter() - t0,
            "n_texts": min(len(corpus.train_texts), knn_train_max) + len(corpus.test_texts)}


def _report(title: str, r: dict) -> None:
    layers = r["layers"]
    print(f"   {title}: {r['stats']['examples']} examples, {r['steps']} steps, loss {r['loss']:.4f}; "
          f"kNN and CKA on {r['n_texts']} texts (kNN train sample + test)")
    print(f"   {'layer':>7} {'kNN before':>11} {'kNN after':>10} {'change':>7} {'CKA':>7}")
    for row in layers:
        before, after = row["knn_accuracy"] * 100, row["knn_accuracy_tuned"] * 100
        print(f"   {row['layer']:>7} {before:>11.1f} {after:>10.1f} {after - before:>+7.1f} {row['cka']:>7.4f}")
    ckas = [row["cka"] for row in layers]
    lowest = min(range(len(ckas)), key=lambda i: math.inf if math.isnan(ckas[i]) else ckas[i])
    last = len(ckas) - 1
    line("lowest CKA (changed most)", f"layer {lowest} ({ckas[lowest]:.4f}); the last layer changes most: "
                                      f"{'yes' if lowest == last else 'no'}")
    rises = [f"{i}->{i + 1}" for i in range(1, last) if ckas[i + 1] > ckas[i]]
    line("CKA falls with depth (layers 1..L)", "yes" if not rises else f"no ({', '.join(rises)} rise)")
    line("wall time", f"examples {r['examples_s']:.0f} s, train {r['train_s']:.0f} s, compare_layers "
                      f"{r['compare_s']:.0f} s")


def run(opts: Options) -> None:
    from core.data.corpus import load_corpus

    with tempfile.TemporaryDirectory(prefix="bench-layer-change-") as tmp:
        tmp = Path(tmp)
        sst2 = _quick_sst2(tmp) if opts.quick else data_file("sst2.csv")
        bbc = _quick_bbc(tmp) if opts.quick else data_file("bbc_news.csv")
        triplets = QUICK_TRIPLETS if opts.quick else TRIPLETS
        crop_steps = QUICK_CROP_STEPS if opts.quick else CROP_STEPS
        # Enough crop pairs that none repeats within the budget (more than one per document when needed).
        per_doc = max(1, math.ceil(crop_steps * BATCH / len(load_corpus(bbc).train_texts)))
        triplet = _layer_run("triplet", {"corpus": str(sst2), "recipe": "triplet", "margin": 0.1,
                                         "distance": "cosine", "examples": triplets, "epochs": 1.0},
                             SST2_KNN_MAX, tmp)
        crop = _layer_run("crop", {"corpus": str(bbc), "recipe": "crop", "margin": 20.0,
                                   "examples": crop_steps * BATCH, "max_steps": crop_steps,
                                   "pairs_per_doc": per_doc}, BBC_KNN_MAX, tmp)

    header("layer_change: linear CKA per layer, reference vs fine-tuned all-MiniLM-L6-v2 (seed 002)",
           f"kNN (k=10, cosine) of each layer's mean-pooled hidden state (0 = embeddings; layer L = the model's own "
           f"embedding), before / after, and linear CKA between the two models' states (1.0 = unchanged); "
           f"batch {BATCH}, seed 0, CPU" + (f"; quick: SST-2 {QUICK_SST2[0]:,} train / {QUICK_SST2[1]} targets, "
                                            f"{QUICK_BBC} BBC docs" if opts.quick else ""))
    _report("(a) triplet, margin 0.1, cosine distance, SST-2", triplet)
    cfg = crop["cfg"]
    _report(f"(b) crop, scale {cfg.margin:g}, lr {cfg.lr:g}, BBC News train docs ({cfg.pairs_per_doc} pairs/doc)", crop)
    line("timed", load_note())
