"""One-pass layer-wise encoding vs one forward pass per layer.

Ours: core.models.encode.encode(..., layers=True) — one forward pass per batch yields the pooled embedding and
every layer's mean-pooled hidden state. Baseline: for each layer l = 0..L, run the model over all texts
with output_hidden_states and keep only layer l (same length-sorted batches, same batch size, so the
only difference is the number of passes). Both must give the same vectors. The arms alternate every few batches, so load from other processes
hits both alike.
"""

from __future__ import annotations

import numpy as np
import torch

from bench.common import Options, header, line, load_minilm, load_note, paired, ratio, runs_note, set_seeds, sst2_texts

BATCH = 64
CHUNK = 4 * BATCH


@torch.inference_mode()
def per_layer_baseline(model, texts: list[str], batch_size: int = BATCH) -> np.ndarray:
    """(L+1, n, h): one full pass over the texts for every layer, keeping only that layer's mean."""
    hf, tok = model[0].model, model.tokenizer
    n_layers = hf.config.num_hidden_layers
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = np.zeros((n_layers + 1, len(texts), hf.config.hidden_size), dtype=np.float32)
    hf.eval()
    for layer in range(n_layers + 1):
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            enc = tok([texts[i] for i in rows], padding=True, truncation=True, max_length=model.max_seq_length,
                      return_tensors="pt")
            hidden = hf(**enc, output_hidden_states=True, return_dict=True).hidden_states[layer]
            m = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            out[layer, rows] = ((hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)).float().numpy()
    return out


def run(opts: Options) -> None:
    from core.models.encode import encode

    set_seeds()
    n = 300 if opts.quick else 2000
    repeats = 2 if opts.quick else 3
    texts, _ = sst2_texts(n)
    model = load_minilm()
    # Longest first, as both arms batch; chunks of 4 batches are timed alternately (A B, B A, ...).
    order = np.argsort([-len(t) for t in texts], kind="stable")
    ordered = [texts[i] for i in order]
    chunks = [ordered[i : i + CHUNK] for i in range(0, n, CHUNK)]
    t, runs, outs = paired({"ours": lambda c: encode(model, c, batch_size=BATCH, layers=True).layers,
                            "baseline": lambda c: per_layer_baseline(model, c)},
                           chunks, repeats=repeats, warmup=texts[:BATCH], budget_s=150 if opts.quick else 480)
    a, b = np.concatenate(outs["ours"], axis=1), np.concatenate(outs["baseline"], axis=1)
    n_layers = a.shape[0]
    diff = float(np.abs(a - b).max())
    cos = float(np.min(np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))))

    header("layerwise: one-pass layer-wise encoding vs one forward pass per layer",
           f"all-MiniLM-L6-v2, {n} SST-2 texts, batch {BATCH}, {n_layers} hidden states (0 = embeddings); "
           f"arms alternate every {CHUNK} texts; median of {len(runs['ours'])} repeats, {load_note()}")
    line("ours (one pass, all layers)", f"{t['ours']:.2f} s  ({n / t['ours']:.0f} texts/s)")
    line("baseline (one pass per layer)", f"{t['baseline']:.2f} s  ({n / t['baseline']:.0f} texts/s)")
    line("all repeats (s, in order)", runs_note(runs))
    line("speed-up baseline / ours", f"{ratio(t['baseline'], t['ours'])}x  "
                                     f"(passes per text: baseline {n_layers}, ours 1)")
    line("same vectors", f"{'yes' if diff < 1e-4 else 'NO'} (max |diff| {diff:.1e}, min cosine {cos:.6f})")
