"""Crop augmentation vs SimCSE dropout (seed 002; docs/definitions.md, Crop augmentation).

A randomly initialised BERT (same weights for both arms) is trained from scratch on BBC News documents,
once with crop pairs (two different chunks of t = 2 sentences of one document) and once with dropout
pairs (one chunk twice), same number of batches, MultipleNegativesRankingLoss scale 20 (tau 0.05),
through core.training.trainer.make_trainer. kNN accuracy (core.evaluation.metrics.knn_accuracy on core.models.encode embeddings,
BBC stratified split from core.data.corpus.load_corpus) before, after 100 batches and at the end; the seed
002 claim is that most of the gain comes in the first ~100 batches.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Options, data_file, header, line, set_seeds

BATCH = 32
SCALE = 20.0
LR = 1e-4  # from scratch: higher than the 2e-5 used to fine-tune a pretrained model


def build_random_bert(path: Path, *, layers: int, hidden: int, heads: int, max_seq_length: int,
                      seed: int = 0) -> Path:
    """A random-weights BERT with the packaged MiniLM word-piece tokenizer, saved as an ST directory."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    from core.models.loading import resolve_model

    path.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model())
    tokenizer.save_pretrained(str(path))
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=4 * hidden, max_position_embeddings=512)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(str(path))
    transformer = Transformer(str(path), max_seq_length=max_seq_length)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode="mean"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(path))
    return path


class KnnProbe:
    """kNN accuracy of the current model on the BBC split (train documents are the neighbours)."""

    def __init__(self, corpus, n_base: int | None, seed: int = 0):
        rows = np.arange(len(corpus.train_texts))
        if n_base is not None and n_base < len(rows):
            rows = np.sort(np.random.default_rng(seed).choice(rows, n_base, replace=False))
        self.base_texts = [corpus.train_texts[i] for i in rows]
        self.base_labels = corpus.train_labels[rows]
        self.test_texts, self.test_labels = corpus.test_texts, corpus.test_labels

    def __call__(self, model) -> float:
        from core.evaluation.metrics import knn_accuracy
        from core.models.encode import encode

        base = encode(model, self.base_texts, batch_size=64).embeddings
        test = encode(model, self.test_texts, batch_size=64).embeddings
        return knn_accuracy(base, self.base_labels, test, self.test_labels)


def train_arm(recipe: str, model_dir: Path, docs: list[str], steps: int, checkpoint: int, probe: KnnProbe,
              work: Path) -> dict:
    from transformers import TrainerCallback

    from core.data.crops import crop_pairs, dropout_pairs, to_dataset
    from core.models.loading import load_model
    from core.training.config import TrainConfig
    from core.training.recipes import get_recipe
    from core.training.trainer import SilentReporter, make_trainer

    set_seeds()
    # Enough pairs that no pair repeats within the budget (more than one per document when needed).
    per_doc = max(1, math.ceil(steps * BATCH / len(docs)))
    make = crop_pairs if recipe == "crop" else dropout_pairs
    pairs = make(docs, t=2, seed=0, pairs_per_doc=per_doc)
    dataset = to_dataset(pairs)
    model = load_model(str(model_dir), "cpu")
    cfg = TrainConfig(corpus="bbc_news.csv", recipe=recipe, margin=SCALE, batch_size=BATCH, lr=LR,
                      max_steps=steps, warmup_ratio=0.1, seed=0, device="cpu")
    loss = get_recipe(recipe).build_loss(model, cfg)
    trainer = make_trainer(cfg, model, loss, dataset, work / recipe, SilentReporter())
    mid: dict[str, float] = {}

    class Checkpoint(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == checkpoint:
                t0 = time.perf_counter()
                mid["acc"] = probe(model)
                mid["eval_s"] = time.perf_counter() - t0

    trainer.add_callback(Checkpoint())
    t0 = time.perf_counter()
    out = trainer.train()
    train_s = time.perf_counter() - t0 - mid.get("eval_s", 0.0)
    return {"pairs": len(dataset), "per_doc": per_doc, "mid": mid["acc"], "end": probe(model),
            "steps": int(out.global_step), "loss": float(out.training_loss), "train_s": train_s}


def run(opts: Options) -> None:
    from core.data.corpus import load_corpus
    from core.models.loading import load_model

    set_seeds()
    steps = 30 if opts.quick else 300
    checkpoint = min(100, steps // 3)
    layers, hidden, heads = 4, 256, 4
    max_len = 128 if opts.quick else 256
    corpus = load_corpus(data_file("bbc_news.csv"))
    probe = KnnProbe(corpus, n_base=600 if opts.quick else None)
    with tempfile.TemporaryDirectory(prefix="bench-crops-") as tmp:
        tmp = Path(tmp)
        model_dir = build_random_bert(tmp / "random-bert", layers=layers, hidden=hidden, heads=heads,
                                      max_seq_length=max_len)
        before = probe(load_model(str(model_dir), "cpu"))
        arms = {recipe: train_arm(recipe, model_dir, corpus.train_texts, steps, checkpoint, probe, tmp)
                for recipe in ("crop", "dropout")}

    header("crops: crop augmentation vs SimCSE dropout, from scratch (seed 002)",
           f"random BERT ({layers} layers, hidden {hidden}, MiniLM tokenizer, max {max_len} tokens, seed 0), "
           f"BBC News {len(corpus.train_texts)} train docs, {steps} batches of {BATCH}, MNRL scale {SCALE:g}, "
           f"lr {LR:g}; kNN (k=10) on {len(probe.test_labels)} test docs vs {len(probe.base_labels)} train docs")
    line("kNN accuracy before (both arms)", f"{before * 100:.1f}")
    for recipe, r in arms.items():
        gain = r["end"] - before
        share = (r["mid"] - before) / gain if abs(gain) > 1e-9 else float("nan")
        line(f"{recipe}: after {checkpoint} / after {r['steps']}",
             f"{r['mid'] * 100:.1f} / {r['end'] * 100:.1f}  (gain {gain * 100:+.1f}; "
             f"share of final gain by batch {checkpoint}: {share:.2f})")
        line(f"{recipe}: pairs, train time", f"{r['pairs']} pairs ({r['per_doc']}/doc), {r['train_s']:.0f} s, "
                                            f"loss {r['loss']:.4f}")
    c, d = arms["crop"], arms["dropout"]
    line("final gain ratio crop / dropout", f"{(c['end'] - before) / (d['end'] - before):.2f}"
         if abs(d["end"] - before) > 1e-9 else "n/a (dropout gained nothing)")
