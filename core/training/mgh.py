"""Multi-granularity hard negatives with a curriculum (docs/definitions.md, Multi-granularity hard negatives;
seed 004): InfoNCE with in-batch negatives plus one hard negative per anchor, whose difficulty band follows the
run's order (curriculum N4 -> N1, random, reverse, fixed:K).

Rows keep all four band negatives as columns (core.data.bands); ``band_callback`` sets the loss's band before every
optimiser step from the step count, so the trainer's row shuffling cannot disturb the schedule.

Mining, models and the loss are imported inside the functions: the recipe registry is read by the CLI and the
pages before any training.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.training.examples import Progress
from core.training.params import Param
from core.training.recipe import Recipe, knob

ORDER_HELP = ("Which band's negative each step uses: 'curriculum' N4 (easiest) for the first quarter of the steps, "
              "then N3, N2, N1 (hardest); 'reverse' N1 first; 'random' a band drawn per step; 'fixed:K' always NK.")


BANDS = 4  # N1 (hardest) .. N4 (easiest), as core.data.bands mines them
ORDERS = ("curriculum", "random", "reverse", *(f"fixed:{k}" for k in range(1, BANDS + 1)))


def band_at(order: str, step: int, total: int, seed: int = 0) -> int:
    """The band (1 = hardest .. 4 = easiest) that step `step` (0-based) of `total` trains on.

    curriculum: N4 for the first quarter of the steps, then N3, N2, N1; reverse: N1 first; random: drawn per step
    (seeded by seed and step, so a rerun draws the same); fixed:K: always NK.
    """
    if order.startswith("fixed:"):
        return int(order.split(":")[1])
    if order == "random":
        return int(np.random.default_rng((seed, step)).integers(1, BANDS + 1))
    quarter = min(BANDS - 1, BANDS * max(step, 0) // max(total, 1))
    if order == "curriculum":
        return BANDS - quarter
    if order == "reverse":
        return 1 + quarter
    raise ValueError(f"unknown order {order!r}; choose one of {', '.join(ORDERS)}")


def band_phases(order: str, total: int) -> list[dict]:
    """Where a scheduled order starts each band: [{"step", "label"}] for the loss curve; none for random, fixed."""
    if order not in ("curriculum", "reverse"):
        return []
    starts = sorted({-(-q * total // BANDS) for q in range(BANDS)} & set(range(total)))  # ceil(q * total / 4)
    return [{"step": s, "label": f"N{band_at(order, s, total)}"} for s in starts]


def band_callback(loss, order: str, seed: int):
    """A TrainerCallback that, before every optimiser step, points `loss` at the band the order gives for it."""
    from transformers import TrainerCallback  # loads torch: not needed to list the recipes

    class BandCallback(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            loss.band = band_at(order, state.global_step, state.max_steps, seed)

    return BandCallback()


def _check_edges(value: str) -> str:
    from core.data.bands import parse_edges

    return ",".join(map(str, parse_edges(value)))


def banded_examples(cfg, corpus, reference, _fmt: str, progress: Progress | None = None):
    """(Dataset of anchor, positive, n1..n4, stats with the bands' mean reference cosines and a preview row), mined
    among the train sample the evaluation encodes, so the reference embeddings come from its cache; with
    cfg.negatives, a negatives file's rows instead (generated_examples)."""
    from core.data.bands import TEXT_COLUMNS, BandSettings, mine_bands, parse_edges
    from core.data.mining import MiningSettings
    from core.evaluation.evaluate import EvalSettings, eval_sets

    if cfg.negatives:
        examples = generated_examples(cfg, reference, progress)
    else:
        sets = eval_sets(corpus, EvalSettings())
        positives = MiningSettings(k=cfg.mine_k, threshold=cfg.threshold, max_examples=cfg.examples, seed=cfg.seed)
        examples = mine_bands(reference, sets.train_texts, sets.train_labels,
                              BandSettings(parse_edges(cfg.bands), positives), corpus_fp=sets.key, progress=progress)
    first = examples.frame.iloc[0]
    preview = [{"role": "anchor", "text": first["anchor"], "cosine": None},
               {"role": "positive", "text": first["positive"], "cosine": None},
               *({"role": f"N{b}", "text": first[f"n{b}"], "cosine": round(float(first[f"c{b}"]), 4)}
                 for b in range(1, 5))]
    return examples.frame[TEXT_COLUMNS].pipe(_dataset), {**examples.stats, "order": cfg.order, "preview": preview}


def generated_examples(cfg, reference, progress: Progress | None = None):
    """A negatives file's rows as banded examples: query as anchor, band k's negative its negative_k (seed 004's
    generated negatives, hardest first), at most cfg.examples rows drawn with the seed; each band's mean
    reference cosine to the query in the stats, as mined bands report theirs."""
    import pandas as pd

    from core.data.bands import COSINE_COLUMNS, TEXT_COLUMNS
    from core.data.mining import Examples, unit_rows
    from core.data.negatives import load_negatives
    from core.data.provenance import generation_summary
    from core.models.encode import encode_cached

    rows = load_negatives(cfg.negatives).rows
    take = np.sort(np.random.default_rng(cfg.seed).permutation(len(rows))[: cfg.examples])
    chosen = [rows[i] for i in take]
    frame = pd.DataFrame({"anchor": [r.query for r in chosen], "positive": [r.positive for r in chosen],
                          **{f"n{b + 1}": [r.negatives[b] for r in chosen] for b in range(BANDS)}})
    texts = list(dict.fromkeys(t for column in TEXT_COLUMNS for t in frame[column]))
    where = {t: i for i, t in enumerate(texts)}
    emb = unit_rows(encode_cached(reference, texts, progress=progress))
    query = emb[[where[t] for t in frame["anchor"]]]
    for b in range(BANDS):
        frame[f"c{b + 1}"] = np.einsum("ij,ij->i", query, emb[[where[t] for t in frame[f"n{b + 1}"]]])
    stats = {"format": "banded", "negatives_file": Path(cfg.negatives).name, "available": len(rows),
             "examples": len(frame), "band_cosine": [round(float(frame[c].mean()), 4) for c in COSINE_COLUMNS]}
    if (generated := generation_summary(cfg.negatives)) is not None:
        stats["generated"] = generated
    return Examples("banded", frame, stats)


def bands_needs(cfg, corpus) -> str | None:
    """Refuse, before the reference encodes anything, a corpus too small for the last band: an anchor needs at least
    as many other-label texts in the mined train sample as N4's last rank (mining would find no anchor). A run on a
    negatives file mines nothing: the file is read and checked instead."""
    from core.data.bands import parse_edges
    from core.evaluation.evaluate import EvalSettings, eval_sets

    if cfg.negatives:
        from core.data.negatives import load_negatives

        load_negatives(cfg.negatives)  # a UserError where the file cannot train
        return None
    last = parse_edges(cfg.bands)[-1]
    labels = eval_sets(corpus, EvalSettings()).train_labels
    _values, counts = np.unique(labels, return_counts=True)
    most = len(labels) - int(counts.min()) if len(counts) else 0
    if most < last:
        return (f"{corpus.name} is too small for the bands {cfg.bands}: N4 ends at other-label rank {last}, and no "
                f"training text has more than {most:,} other-label texts among the {len(labels):,} mined: use a larger "
                "corpus or lower the band edges.")
    return None


def _dataset(frame):
    from datasets import Dataset

    return Dataset.from_pandas(frame, preserve_index=False)


def _loss(model, cfg):
    from core.losses.mgh import BandedMNRLoss

    return BandedMNRLoss(model, scale=cfg.margin, band=band_at(cfg.order, 0, 1, cfg.seed))


ORDER = Param("order", str, "curriculum", "Band order", ORDER_HELP,
              choices=ORDERS)
BAND_EDGES = Param("bands", str, "5,20,50,100", "Band edges", "The last reference-cosine rank of N1..N4 among other-label "
              "texts: 5,20,50,100 means N1 = ranks 1-5, N2 = 6-20, N3 = 21-50, N4 = 51-100.", check=_check_edges)

NEGATIVES_FILE = Param("negatives", str, None, "Negatives file", "Train on a file's (query, positive, negative_1..4) "
                       "rows, band k's negative being negative_k (python -m core generate negatives writes one), "
                       "instead of mining bands from the corpus; the corpus is still evaluated before and after.",
                       optional=True, file=True)

MGH = [
    # In-batch negatives must not see the same text twice in a batch, as for MNRL.
    Recipe("mgh", "Multi-granularity hard negatives (curriculum)", "banded",
           _loss, knob="margin", examples=banded_examples, batch_sampler="no_duplicates",
           params=(knob("margin", "Scale", 20.0, (5.0, 10.0, 20.0, 50.0),
                        "InfoNCE scale (1 / temperature). Seed 004 gives none; 20 (temperature 0.05) is "
                        "sentence-transformers' MultipleNegativesRankingLoss default and SimCSE's temperature."),
                   ORDER, BAND_EDGES, NEGATIVES_FILE,
                   Param("mine_k", int, 5, "Positives (k)", "Nearest same-label texts per anchor at cosine >= the "
                         "threshold; each gives one row with the anchor's four band negatives.", low=1, high=100),
                   Param("threshold", float, 0.5, "Cosine threshold", "Positives below it are not used (negatives "
                         "come from their bands whatever their cosine).", low=-1.0, high=1.0, step=0.05)),
           needs=bands_needs, callbacks=lambda cfg, loss: [band_callback(loss, cfg.order, cfg.seed)],
           phases=lambda cfg, total: band_phases(cfg.order, total), shown=("order",)),
]
