"""RAOE (seed 001; docs/definitions.md, RAOE): CoSENT, AnglE and RAOE with its ablations, scored on STS-B test.

The arms are the `raoe` reproduction (core.reproduce.raoe) run in this process, so the benchmark and `python -m core
reproduce raoe` are one experiment with one home: stage 2 (STS-B train pairs, the gold score as s) with CoSENT and
AnglE on the same pairs and, at full size, stage 1 (SNLI validation pairs, l = entailment 0 < neutral 1 <
contradiction 2, s = the reference model's cosine) with the paper's ablations and the all-mpnet-base-v2 teacher when
`make mpnet` installed it. Its table carries the published figures and 95% intervals.

Two stage-2 checks of the loss train beside it through core.reproduce.job.run_arms, on the stage-2 arm's pairs,
seed and budget: RAOE full (STS-B has no NLI label, so L_angle gates no pair and it must equal L_rank only) and
L_rank at I = 32 (I_eff 2 at batch 32, the unscaled I = 2 of before). Timed: each arm's training time against
CoSENT's, and the loss alone (forward + backward from a batch of embeddings, interleaved), the only work that differs
between the arms and that the encoder's share of a training step hides. Whatever comes out is printed as it is.
"""

from __future__ import annotations

from bench.common import (
    REPO,
    Options,
    header,
    interleaved,
    line,
    load_minilm,
    load_note,
    ratio,
    reproduce,
    runs_note,
    train_arms,
)

BATCH = 32  # the loss timing's batch: the full run's


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


def _checks(stage2: dict) -> list:
    """The bench's own stage-2 arms: the reproduction's stage-2 run (its stored config) with the full loss, and
    with I = 32."""
    from core.reproduce.experiment import Arm

    return [Arm("RAOE full (s = gold score, no labels)", {**stage2, "recipe": "raoe"}),
            Arm("RAOE L_rank only, I = 32", {**stage2, "interval": 32})]


def run(opts: Options) -> None:
    from core.reproduce import raoe
    from core.reproduce.experiment import figure
    from core.reproduce.report import table_text

    result, runs = reproduce("raoe", opts.quick)
    cosent, rank = runs[raoe.STAGE2[0][0]], runs[raoe.STAGE2[2][0]]
    checks = train_arms(_checks(rank["run"].config))
    config = cosent["run"].config
    header("raoe: CoSENT, AnglE and RAOE ablations (seed 001), STS-B test Spearman x 100, `python -m core reproduce "
           f"raoe{' --quick' if opts.quick else ''}` and its runs",
           f"all-MiniLM-L6-v2, stage 2: {cosent['examples']['examples']} STS-B train pairs per arm, 1 epoch "
           f"({cosent['steps']} steps of {config['batch_size']}), lr {config['lr']:g}, seed {config['seed']}, CPU; "
           f"STS-B test {cosent['before']['n_pairs']} pairs; 95% intervals")
    print(table_text(result["rows"]))

    base_s = cosent["timings"]["train_s"]
    print("   per arm: train time (ratio to CoSENT's), mean optimiser step, mean training loss; the bench's own "
          "stage-2 checks (last two) with their STS-B Spearman")
    for label, r in {**runs, **checks}.items():
        train_s = r["timings"]["train_s"]
        value, low, high = figure(r["after"], "sts_spearman")
        spearman = "" if label in runs else f"STS-B {value:.2f} [{low:.2f}, {high:.2f}]; "
        line(label, f"{spearman}train {train_s:.0f} s (x{ratio(train_s, base_s)}), step "
                    f"{train_s / r['steps'] * 1000:.0f} ms, loss {r['train_loss']:.4f}")
    full = checks["RAOE full (s = gold score, no labels)"]
    same = (abs(full["after"]["sts_spearman"] - rank["after"]["sts_spearman"]) < 1e-6
            and full["train_loss"] == rank["train_loss"])
    line("full = L_rank only (no labels)", f"{'yes' if same else 'NO'} (no pair is label-ordered, so L_angle "
                                           "gates none)")
    gap = rank["after"]["sts_spearman"] - cosent["after"]["sts_spearman"]
    line("L_rank at I_eff < 1 = CoSENT", f"{'yes' if abs(gap) < 1e-6 else 'not exactly'} (Spearman {gap:+.4f}, train "
                                         f"loss {rank['train_loss']:.4f} vs {cosent['train_loss']:.4f}): the same "
                                         "loss on a batch of embeddings, tied s left out by both (tests check it "
                                         "to 1e-5), but RAOE embeds both columns in one padded forward and CoSENT "
                                         "one per column, so dropout draws and rounding differ")
    if not opts.quick:
        _stage1(runs)
    line("timed", "trainer.train() wall time per arm; ratios are to CoSENT's (stage 1 trains on SNLI's sentences, "
                  f"not STS-B's); arms run one after another, {load_note()}")
    per_loss, loss_runs = _loss_times(load_minilm(), opts.quick)
    print(f"   the loss alone: forward + backward from a batch of {BATCH} embedding pairs, median of interleaved "
          f"rounds ({len(loss_runs['CoSENT'])}), {load_note()}")
    for name, seconds in per_loss.items():
        line(name, f"{seconds * 1e6:.0f} us  (x{ratio(seconds, per_loss['CoSENT'])} CoSENT)")
    line("all rounds (us per call)", runs_note(loss_runs, unit=1e6, fmt="{:.0f}"))


def _stage1(runs: dict) -> None:
    """The full run's stage-1 lines: how many training pairs the gate keeps, and the gate ablation's trend."""
    from core.reproduce import raoe

    full = runs[raoe.STAGE1[0]]
    share = full["examples"]["gated_share"]
    line("stage 1: gated share", f"{share if share is None else f'{share:.3f}'} of the l_i > l_j training pairs "
                                 "whose s agrees")
    label_only, _, published = raoe.GATE_ON_LABELS
    diff = full["after"]["sts_spearman"] - runs[label_only]["after"]["sts_spearman"]
    line("full beats gate on labels only", f"{'yes' if diff > 0 else 'no'} ({diff:+.2f}; published "
                                           f"{raoe.ABLATION_FULL - published:+.2f}, average of 7 STS tasks)")
    if raoe.MPNET_LABEL not in runs:
        line(raoe.MPNET_LABEL, f"skipped: not installed ({raoe.MPNET.relative_to(REPO)}; `make mpnet`)")
