"""ATA pooling measured (seed 004; docs/definitions.md, ATA pooling): anchor-token-aware pooling against mean and
CLS pooling of the same all-MiniLM-L6-v2, on STS-B test Spearman.

(a) Zero-shot: the model with its own mean pooling, with CLS pooling and with ATA pooling
    (core.training.trainer.set_pooling on fresh copies), no training; plus the seconds to encode the test texts
    per pooling, interleaved, with mean pooling under eager attention as the baseline that isolates the cost of
    the attention kernel from that of the weights.
(b) Fine-tuned: the `ata` reproduction's runs (core.reproduce.ata: the same short CoSENT run, scale 20, on STS-B
    train pairs with pooling mean vs ATA, the same pairs, seed and budget), trained and evaluated as runs through
    core.reproduce.job.run_arms; STS-B test Spearman after, with its 95% interval, and the training time. ATA
    needs the attention probabilities, so it trains with eager attention; the ratio says how
    much slower that is. The ATA run's saved model is then reloaded with ContrastLab's loader
    (core.models.loading.load_model) and scored again, and a plain ``SentenceTransformer(dir)`` without
    ``trust_remote_code`` is tried to show what a user without ContrastLab meets.

Whatever comes out is printed as it is.
"""

from __future__ import annotations

import copy
from pathlib import Path

from bench.common import (
    DATA,
    Options,
    header,
    interleaved,
    line,
    load_minilm,
    load_note,
    ratio,
    runs_note,
    set_seeds,
    train_arms,
)


def _eager_copy(model):
    """Mean pooling with eager attention: the timing baseline that ATA's kernel choice should be judged against."""
    model = copy.deepcopy(model)
    model[0].auto_model.set_attn_implementation("eager")
    return model


def _plain_load(path: Path) -> str:
    """What ``SentenceTransformer(dir)`` (no ContrastLab, no trust_remote_code) does with an ATA export."""
    from sentence_transformers import SentenceTransformer

    try:
        SentenceTransformer(str(path), device="cpu")
    except Exception as exc:  # whatever the library raises is the finding
        return f"refused ({type(exc).__name__}: {str(exc).replace(str(path), '<dir>').splitlines()[0]})"
    return "LOADED (the export would not need ContrastLab's loader)"


def run(opts: Options) -> None:
    from core.data.pairs import load_pairs
    from core.evaluation.sts import sts_spearman
    from core.models.encode import encode
    from core.models.loading import load_model
    from core.reproduce import ata as reproduction
    from core.reproduce.experiment import Setup
    from core.training.trainer import set_pooling

    set_seeds()
    base = load_minilm()
    base.eval()
    stsb = load_pairs(DATA / "stsb.csv")
    zero = {"mean": base, "cls": set_pooling(copy.deepcopy(base), "cls"), "ata": set_pooling(base, "ata")}
    zero_shot = {name: sts_spearman(model, stsb) for name, model in zero.items()}

    texts = [*stsb.test.text1, *stsb.test.text2]
    timed = {"mean (sdpa attention)": zero["mean"], "mean, eager attention": _eager_copy(base),
             "ATA (eager attention)": zero["ata"]}
    warm = texts[: 2 * 64]
    enc_med, enc_runs = interleaved({name: (lambda m=m: encode(m, texts)) for name, m in timed.items()},
                                    repeats=3 if opts.quick else 7,
                                    warmup={name: (lambda m=m: encode(m, warm)) for name, m in timed.items()},
                                    budget_s=30 if opts.quick else 120)

    results = train_arms(reproduction.arms(DATA, Setup(opts.quick, "all-MiniLM-L6-v2")), by="pooling")
    saved = Path(results["ata"]["run"].artefacts["model"])
    reloaded = sts_spearman(load_model(str(saved), "cpu"), stsb)
    plain = _plain_load(saved)

    mean, ata = results["mean"], results["ata"]
    header("ata: ATA vs mean and CLS pooling, STS-B test Spearman x 100 (seed 004)",
           f"all-MiniLM-L6-v2, STS-B test {len(stsb.test)} pairs; fine-tuning (`python -m core reproduce ata"
           f"{' --quick' if opts.quick else ''}`'s runs): CoSENT scale 20 on {mean['examples']['examples']} STS-B "
           f"train pairs, batch {reproduction.BATCH}, "
           f"{mean['steps']} steps, lr 3e-5, seed 0, CPU")
    print("   zero-shot (no training; ratio to mean pooling)")
    for name, label in (("mean", "mean (the model's own)"), ("cls", "CLS"), ("ata", "ATA")):
        line(label, f"{zero_shot[name]:.2f}  (x{ratio(zero_shot[name], zero_shot['mean'])}, "
                    f"{zero_shot[name] - zero_shot['mean']:+.2f})")
    first = next(iter(enc_med))
    print(f"   encoding the {len(texts)} test texts, batch 64, median of interleaved rounds "
          f"({len(enc_runs[first])}), {load_note()}")
    for name, seconds in enc_med.items():
        line(name, f"{seconds:.2f} s  (x{ratio(seconds, enc_med[first])})")
    line("all rounds (s)", runs_note(enc_runs, fmt="{:.2f}"))
    print("   fine-tuned, the same CoSENT run per pooling (before = zero-shot with that pooling)")
    for pooling, r in results.items():
        before, after = zero_shot[pooling], r["after"]["sts_spearman"]
        low, high = r["after"]["sts_spearman_ci"]
        line(pooling, f"{before:.2f} -> {after:.2f} [{low:.2f}, {high:.2f}]  ({after - before:+.2f})   "
                      f"train {r['timings']['train_s']:.0f} s "
                      f"(x{ratio(r['timings']['train_s'], mean['timings']['train_s'])}), loss {r['train_loss']:.4f}")
    line("run_training's before = zero-shot mean", f"{mean['before']['sts_spearman']:.2f} vs {zero_shot['mean']:.2f}")
    line("same training pairs in both arms", "yes" if mean["examples"] == ata["examples"] else "NO")
    line("ATA / mean after fine-tuning", f"{ratio(ata['after']['sts_spearman'], mean['after']['sts_spearman'])} "
                                         f"({ata['after']['sts_spearman'] - mean['after']['sts_spearman']:+.2f})")
    line("training time ATA / mean", f"x{ratio(ata['timings']['train_s'], mean['timings']['train_s'])} "
                                     "(ATA: eager attention, every layer's probabilities kept for the weights)")
    same = reloaded is not None and abs(reloaded - ata["after"]["sts_spearman"]) < 1e-6
    line("ATA export reloads (load_model)", f"{reloaded:.2f}, same as after training: {'yes' if same else 'NO'}")
    line("plain SentenceTransformer(dir)", plain)
    line("timed", "trainer.train() wall time per arm; arms run one after another, " + load_note())
