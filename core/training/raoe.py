"""RAOE recipes (docs/definitions.md, RAOE): the full rank-margin + gated angular loss and its two ablations,
trained on pairs labelled (s, l): a teacher's continuous score s (higher = more related) and an ordinal label l
(0 = most related).

Where the pairs come from:
- a pair corpus (text1, text2, score and/or label): its train split; l is its NLI label (entailment 0 < neutral 1 <
  contradiction 2), or the same for every pair when it has none (L_angle then has nothing to gate);
- a labelled corpus: pairs mined with the frozen reference model (core.data.mining's contrastive format), l = 0 for
  a same-label pair and 1 for an other-label pair.

The teacher gives s: the frozen reference model's cosine (default), another model's cosine, or the pair corpus's
own score column; any model stronger than the student can be named, so s need not be self-distillation.

Data, models and the loss are imported inside the functions: they load torch, FAISS and scikit-learn, and the
recipe registry that lists these recipes is read by the CLI and the pages before any training.
"""

from __future__ import annotations

import numpy as np

from core.errors import UserError
from core.training.examples import Progress, mine_train_sample
from core.training.params import Param
from core.training.recipe import MINING, Recipe

TEACHER_HELP = ("Where the score s comes from: 'reference' (the frozen reference model's cosine), 'score' (the pair "
                "corpus's own score column), or a model name or folder whose cosine is used.")


def teacher_needs(cfg, corpus) -> str | None:
    """teacher 'score' reads the corpus's score column: only a pair corpus with one has it."""
    if cfg.teacher == "score" and (corpus.kind != "pairs" or corpus.columns.score is None):
        return "teacher 'score' needs a pair corpus with a score column; use teacher 'reference' or name a model."
    return None


def teacher_model(cfg, reference):
    """The frozen model whose cosine is the teacher's judgement: the reference model, or the one cfg.teacher names."""
    from core.models.loading import load_model

    if cfg.teacher == "reference":
        return reference
    teacher = load_model(cfg.teacher, cfg.device)
    teacher.requires_grad_(False)
    return teacher


def teacher_scores(cfg, reference, text1: list[str], text2: list[str], gold: np.ndarray | None,
                   progress: Progress | None = None) -> np.ndarray:
    """s for each pair: the gold score, or the teacher model's cosine (its embeddings come from the disk cache)."""
    from core.models.encode import encode_cached

    if cfg.teacher == "score":
        return gold.astype(np.float64)
    teacher = teacher_model(cfg, reference)
    a = encode_cached(teacher, text1, progress=progress)
    b = encode_cached(teacher, text2, progress=progress)
    a = a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)
    b = b / np.clip(np.linalg.norm(b, axis=1, keepdims=True), 1e-12, None)
    return (a * b).sum(axis=1).astype(np.float64)


def ranked_pairs(cfg, corpus, reference, _fmt: str, progress: Progress | None = None):
    """(Dataset with sentence1, sentence2 and label = [s, l], stats) for a RAOE recipe, subsampled to cfg.examples
    (seed)."""
    import torch
    from datasets import Dataset

    from core.data.mining import MiningSettings
    from core.data.pairs import PairCorpus
    from core.losses.raoe import gated_share

    if isinstance(corpus, PairCorpus):
        split = corpus.train
        if len(split) == 0:
            raise UserError(f"{corpus.name} has no train pairs to learn from; give it a split column with 'train' "
                            "rows, or drop the split column to hold out 10%.")
        text1, text2 = list(split.text1), list(split.text2)
        ordinal = np.where(split.labels >= 0, split.labels, 0).astype(np.float64)
        gold = split.scores if corpus.columns.score else None
        source = "pair corpus"
    else:
        settings = MiningSettings(k=cfg.mine_k, threshold=cfg.threshold, max_examples=10**9, seed=cfg.seed)
        frame = mine_train_sample(reference, corpus, "contrastive", settings, progress).frame
        text1, text2 = frame["sentence1"].tolist(), frame["sentence2"].tolist()
        ordinal = 1.0 - frame["label"].to_numpy(dtype=np.float64)  # mined label 1 = same class -> l = 0
        gold = None
        source = "mined from labels"
    rows = np.arange(len(text1))
    if len(rows) > cfg.examples:
        rows = np.sort(np.random.default_rng(cfg.seed).choice(len(rows), cfg.examples, replace=False))
    text1, text2, ordinal = [text1[i] for i in rows], [text2[i] for i in rows], ordinal[rows]
    scores = teacher_scores(cfg, reference, text1, text2, None if gold is None else gold[rows], progress)
    share = gated_share(torch.from_numpy(scores), torch.from_numpy(ordinal))
    dataset = Dataset.from_dict({"sentence1": text1, "sentence2": text2,
                                 "label": np.stack([scores, ordinal], axis=1).tolist()})
    stats = {"format": "ranked pairs", "source": source, "teacher": cfg.teacher, "examples": len(dataset),
             "gated_share": None if np.isnan(share) else round(share, 4),
             "label_levels": sorted({int(v) for v in ordinal})}
    return dataset, stats


def _loss(**fixed: float | str):
    """The RAOE loss with the run's settings; an ablation fixes some (a weight of 0 drops that term)."""
    def build(model, cfg):
        from core.losses.raoe import RAOELoss

        settings = {name: fixed[name] if name in fixed else getattr(cfg, name)
                    for name in ("tau", "interval", "w_rank", "w_angle", "gate")}
        return RAOELoss(model, **settings)
    return build


TEACHER = Param("teacher", str, "reference", "Teacher", TEACHER_HELP)
TAU = Param("tau", float, 20.0, "Scale tau", "Sharpness of both terms (1 / temperature); CoSENT's scale.",
            low=0.0, low_open=True, high=1000.0)
INTERVAL = Param("interval", int, 2, "Rank margin I", "A pair enters L_rank only with a pair more than I ranks "
                 "above it (rank units: its effect grows with the batch size).", low=0, high=10_000,
                 presets=(0, 1, 2, 4, 8))
W_RANK = Param("w_rank", float, 1.0, "Weight of L_rank", "Weight of the rank-margin term on the cosine.",
               low=0.0, high=100.0)
W_ANGLE = Param("w_angle", float, 1.0, "Weight of L_angle", "Weight of the angle term gated by score and label.",
                low=0.0, high=100.0)
GATE = Param("gate", str, "both", "Gate of L_angle", "Which pairs L_angle orders: 'both' where label and score "
             "agree, 'label' by the label alone, 'score' by the score alone (the paper's gate ablations).",
             choices=("both", "label", "score"))

_KINDS = ("labelled", "pairs")
RAOE = [
    Recipe("raoe", "RAOE (rank-margin + gated angle)", "ranked pairs", _loss(), examples=ranked_pairs,
           knob="interval", params=(INTERVAL, TEACHER, TAU, W_RANK, W_ANGLE, GATE, *MINING), kinds=_KINDS,
           needs=teacher_needs),
    Recipe("raoe_rank", "RAOE ablation: L_rank only", "ranked pairs", _loss(w_rank=1.0, w_angle=0.0, gate="both"),
           examples=ranked_pairs, knob="interval", params=(INTERVAL, TEACHER, TAU, *MINING), kinds=_KINDS,
           needs=teacher_needs),
    Recipe("raoe_angle", "RAOE ablation: L_angle only", "ranked pairs",
           _loss(interval=0, w_rank=0.0, w_angle=1.0, gate="both"), examples=ranked_pairs,
           params=(TEACHER, TAU, *MINING), kinds=_KINDS, needs=teacher_needs),
]
