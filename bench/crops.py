"""Crop augmentation vs SimCSE dropout (seed 002; docs/definitions.md, Crop augmentation): the `crops` reproduction
(core.reproduce.crops: all-MiniLM-L6-v2 fine-tuned on BBC News with crop pairs, with dropout pairs as the baseline,
and with crop pairs training only the top 2 layers; MNRL scale 20, the same batches, lr 2e-5 and seed) run in this
process, so the benchmark and `python -m core reproduce crops` are one experiment with one home. Its table is kNN
accuracy before and after, with 95% intervals; the benchmark adds each arm's gain, its training pairs and its
training time against the dropout baseline's (and the top-2 arm's against full fine-tuning's).

The from-scratch arm (a random 4-layer BERT) is gone: the published claim is about fine-tuning a pretrained encoder.
Whatever comes out is printed as it is.
"""

from __future__ import annotations

from bench.common import Options, header, line, load_note, ratio, reproduce


def run(opts: Options) -> None:
    from core.reproduce import crops
    from core.reproduce.report import table_text

    result, arms = reproduce("crops", opts.quick)
    crop, dropout = arms[crops.ARMS[0][0]], arms[crops.ARMS[1][0]]
    before = crop["before"]["knn_accuracy"] * 100
    config = crop["run"].config
    header(f"crops: crop augmentation vs SimCSE dropout (seed 002), `python -m core reproduce crops"
           f"{' --quick' if opts.quick else ''}`",
           f"all-MiniLM-L6-v2 on BBC News, {crop['steps']} batches of {config['batch_size']}, MNRL scale "
           f"{config['margin']:g}, lr {config['lr']:g}, seed {config['seed']}, CPU; kNN (k=10) on "
           f"{crop['before']['n_queries']} test documents, 95% intervals")
    print(table_text(result["rows"]))

    def gain(arm: dict) -> float:
        return arm["after"]["knn_accuracy"] * 100 - before

    base_s = dropout["timings"]["train_s"]
    for label, arm in arms.items():
        stats = arm["examples"]
        line(label, f"gain {gain(arm):+.1f} points; {stats['examples']} pairs; train {arm['timings']['train_s']:.0f} s "
                    f"(x{ratio(arm['timings']['train_s'], base_s)} dropout), loss {arm['train_loss']:.4f}")
    line("gain crops / dropout", ratio(gain(crop), gain(dropout)))
    if crops.TOP_ARM in arms:
        top = arms[crops.TOP_ARM]
        line(f"{crops.TOP_ARM} / all layers", f"gain x{ratio(gain(top), gain(crop))}, train time "
                                              f"x{ratio(top['timings']['train_s'], crop['timings']['train_s'])}")
    line("timed", "trainer.train() wall time per arm; arms run one after another, " + load_note())
