"""Quick margin point (docs/definitions.md, Quick margin point): the top-2 quick run against the same run with every
layer trained, measured in the same process.

1. Speed on the demo corpus with all-MiniLM-L6-v2, as the Trade-off page runs it: `core.jobs.quick.quick_run` hands
   the run to a waiting standby worker (core.jobs.standby) and the point is read back from the run store; seconds
   from the call to the evaluated point, split into the run's own phases (frozen-state cache, training, evaluation)
   and the rest (hand-over, model loading, saving, polling), plus the time to add the point to the plot. The two
   arms alternate, at fresh margins each round (a margin trains once). The first point on the corpus fills the
   caches (encodings, mined triplets, frozen states) and is reported apart.
2. Fidelity on SST-2 (k = 16), margins 0.1 and 5.0: P@16 / S@16 of the top-2 quick model against a full fine-tune on
   the same 256 triplets and 16 steps (`run_training`, same seed), and the seed's trend (S at 0.1 above S at 5.0).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.common import Options, data_file, header, line, load_note, set_seeds

FIDELITY_MARGINS = (0.1, 5.0)
STANDBY_WAIT_S = 120


def sst2_subset(folder: Path) -> Path:
    """--quick: 3,000 train rows (seeded) and the first 200 validation rows, written to a temp file."""
    import pandas as pd

    df = pd.read_csv(data_file("sst2.csv"))
    train = df[df["split"] == "train"].sample(n=3000, random_state=0)
    val = df[df["split"] == "validation"].head(200)
    path = folder / "sst2_quick.csv"
    pd.concat([train, val]).to_csv(path, index=False)
    return path


def _wait_for_standby(store) -> bool:
    """Start a standby (as the page does) and wait until its imports are done; False if it never got ready."""
    from core.jobs import standby

    deadline = time.monotonic() + STANDBY_WAIT_S
    while time.monotonic() < deadline:
        standby.ensure(store)
        if standby.waiting(store):
            return True
        time.sleep(0.2)
    return False


def _point(store, base: dict, context: dict, margin: float, full: bool) -> dict:
    """One quick point from the call to the evaluated run, then onto the plot; its split in seconds."""
    from core.analysis.plots import tradeoff_figure
    from core.analysis.tradeoff import tradeoff_points
    from core.jobs import launch
    from core.jobs.quick import quick_run

    warm = _wait_for_standby(store)
    t0 = time.perf_counter()
    run_id = quick_run(store, base, margin, full=full)
    while (run := launch.poll(store, run_id)).active:
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if run.status != "done":
        raise RuntimeError(f"quick run {run_id} {run.status}: {run.error}")
    t1 = time.perf_counter()
    points = tradeoff_points(store, context["corpus"], context["reference"], memo=context["memo"])
    tradeoff_figure(points)
    timings = run.progress.get("summary", {}).get("timings", {})
    evaluation = timings.get("evaluate_before_s", 0) + timings.get("evaluate_after_s", 0)
    parts = {"frozen states": timings.get("frozen_states_s", 0), "training": timings.get("train_s", 0),
             "evaluation": evaluation, "examples": timings.get("examples_s", 0)}
    return {"wall": wall, "plot": time.perf_counter() - t1, "warm": warm, **parts,
            "rest": wall - sum(parts.values())}


def _speed(opts: Options) -> None:
    from core.data.corpus import demo_corpus_path, load_corpus
    from core.jobs import standby
    from core.models.loading import DEFAULT_MODEL, load_model
    from core.runs.store import RunStore

    store = RunStore()
    corpus_path = str(demo_corpus_path())
    base = {"corpus": corpus_path, "model": DEFAULT_MODEL, "recipe": "triplet"}
    context = {"corpus": load_corpus(corpus_path), "reference": load_model(DEFAULT_MODEL, "cpu"), "memo": {}}
    rounds = 1 if opts.quick else 3
    try:
        first = _point(store, base, context, 0.05, full=False)
        results: dict[str, list[dict]] = {"top-2 quick": [], "all layers": []}
        for r in range(rounds):
            order = list(results) if r % 2 == 0 else list(results)[::-1]
            for arm in order:
                margin = round(0.15 + 0.1 * r, 2)
                results[arm].append(_point(store, base, context, margin, full=arm == "all layers"))
    finally:
        standby.stop_all(store)

    header("quick: a quick margin point, top-2 layers from cached frozen states vs every layer",
           f"demo corpus, all-MiniLM-L6-v2, 256 triplets, 1 epoch, batch 16, handed to a warm standby; medians of "
           f"{rounds} round(s), arms alternating; {load_note()}")
    line("first point on the corpus (caches cold)",
         f"{first['wall']:.1f} s (frozen states {first['frozen states']:.1f} s, evaluation "
         f"{first['evaluation']:.1f} s, training {first['training']:.1f} s)")
    medians = {arm: {key: statistics.median(p[key] for p in points) for key in points[0] if key != "warm"}
               for arm, points in results.items()}
    for arm, m in medians.items():
        warm = all(p["warm"] for p in results[arm])
        line(f"{arm}: call -> evaluated point", f"{m['wall']:.1f} s  (training {m['training']:.1f} s, evaluation "
             f"{m['evaluation']:.1f} s, frozen states {m['frozen states']:.1f} s, hand-over/loading/saving "
             f"{m['rest']:.1f} s; plot {m['plot']:.2f} s){'' if warm else '  [standby not ready]'}")
    top, full = medians["top-2 quick"], medians["all layers"]
    line("ratio top-2 / all layers", f"wall {top['wall'] / full['wall']:.2f}x, training "
         f"{top['training'] / full['training']:.2f}x, evaluation {top['evaluation'] / full['evaluation']:.2f}x")
    line("target", f"click -> point <= 8 s on 2 quiet cores: {top['wall'] + top['plot']:.1f} s measured "
         "(the page adds its poll interval, 0.5 s at most; bench/pages.py times it in the browser)")


def _fidelity(opts: Options) -> None:
    from core.jobs.quick import quick_config
    from core.training.config import TrainConfig
    from core.training.trainer import SilentReporter, run_training

    with tempfile.TemporaryDirectory(prefix="bench-quick-") as tmp:
        tmp = Path(tmp)
        corpus = sst2_subset(tmp) if opts.quick else data_file("sst2.csv")
        base = {"corpus": str(corpus), "recipe": "triplet", "distance": "cosine", "device": "cpu"}
        results: dict[tuple[float, str], dict] = {}
        for margin in FIDELITY_MARGINS:
            for arm, full in (("top-2 quick", False), ("all layers", True)):
                set_seeds()
                cfg = TrainConfig.from_dict(quick_config(base, margin, full=full))
                results[margin, arm] = run_training(cfg, SilentReporter(), tmp / f"{margin}-{arm}")
    before = next(iter(results.values()))["before"]
    header("quick: fidelity of the top-2 quick model to a full fine-tune (seed 000 trend)",
           f"SST-2{' (quick subset: 3,000 train / 200 targets)' if opts.quick else ''}, all-MiniLM-L6-v2, the "
           f"same 256 mined triplets and 16 steps per arm, P@16 / S@16 on {before['n_queries']} targets")
    line("reference (before)  P / S", f"{before['polarity']:.1f} / {before['similarity']:.1f}")
    for margin in FIDELITY_MARGINS:
        quick, full = (results[margin, arm]["after"] for arm in ("top-2 quick", "all layers"))
        line(f"margin {margin:g}  top-2 quick | all layers",
             f"P {quick['polarity']:.1f} | {full['polarity']:.1f} ({quick['polarity'] - full['polarity']:+.1f})   S "
             f"{quick['similarity']:.1f} | {full['similarity']:.1f} ({quick['similarity'] - full['similarity']:+.1f})")
    for arm in ("top-2 quick", "all layers"):
        s_small, s_large = (results[m, arm]["after"]["similarity"] for m in FIDELITY_MARGINS)
        line(f"{arm}: S at 0.1 above S at 5.0", f"{'yes' if s_small > s_large else 'no'} ({s_small - s_large:+.2f})")
    for margin in FIDELITY_MARGINS:
        quick, full = (results[margin, arm]["timings"] for arm in ("top-2 quick", "all layers"))
        line(f"margin {margin:g} training / eval after", f"top-2 {quick['train_s']:.1f} s / "
             f"{quick['evaluate_after_s']:.1f} s vs all layers {full['train_s']:.1f} s / "
             f"{full['evaluate_after_s']:.1f} s (frozen states {quick['frozen_states_s']:.1f} s, paid once per corpus)")


def run(opts: Options) -> None:
    _speed(opts)
    print()
    _fidelity(opts)
