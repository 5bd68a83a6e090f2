"""RAOE recipes (docs/definitions.md, RAOE): the full rank-margin + gated angular loss and its two ablations,
trained on pairs labelled (s, l): a teacher's continuous score s (higher = more related) and an ordinal label l
(0 = most related).

Where the pairs come from:
- a pair corpus (text1, text2, score and/or label): its train split; l is its NLI label (entailment 0 < neutral 1 <
  contradiction 2), or the same for every pair when it has none (L_angle then has nothing to gate);
- a labelled corpus: pairs mined with the frozen reference model (core.data.mining's contrastive format), l = 0 for
  a same-label pair and 1 for an other-label pair.

The teacher gives s: the frozen reference model's cosine (default), another model's cosine, the mean cosine of
several models ('a,b', as seed 001 averages two teachers), or the pair corpus's own score column. The paper's
teachers are stronger than the student; the reference model the run starts from as teacher is self-distillation,
which the Train page and the CLI say (self_distillation_note).

The rank margin I is given at the paper's batch of 512 and scaled to the run's (effective_interval): it is in rank
units, so the same I leaves out a larger share of a smaller batch's ordered pairs.

Data, models and the loss are imported inside the functions: they load torch, FAISS and scikit-learn, and the
recipe registry that lists these recipes is read by the CLI and the pages before any training.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.errors import UserError, shorten
from core.training.examples import Progress, mine_train_sample
from core.training.params import Param
from core.training.recipe import MINING, Recipe

TEACHER_HELP = ("Where the score s comes from: 'reference' (the frozen reference model's cosine), 'score' (the pair "
                "corpus's own score column), or a model name or folder whose cosine is used; several, separated by "
                "commas, average their cosines (the paper averages two teachers stronger than the student).")
PAPER_BATCH = 512  # seed 001's batch: the rank margin I is given at it
PATH_CHARS = 300  # a teacher path quoted whole in a message (a longer one is cut, as any quoted value)


def effective_interval(interval: int, batch_size: int) -> float:
    """I_eff = I x B / 512, the rank margin L_rank uses at a batch of B pairs. I is in rank units, so unscaled it
    would leave out a larger share of a smaller batch's ordered pairs (I = 2: ~0.8% at 512, ~12% at 32); scaled,
    about the paper's share (none where I_eff < 1). B is the batch one process ranks: under DDP each process computes
    the loss on its own batch_size pairs (nothing is gathered across processes), so the per-process batch, not the
    effective one. I_eff stays fractional: rank differences are whole numbers, so r_j - r_i > I_eff compares
    exactly."""
    return interval * batch_size / PAPER_BATCH


def interval_text(interval: int, batch_size: int) -> str:
    """I_eff as the Train page shows it, with how it came about and, below 1, what it leaves L_rank."""
    scaled = effective_interval(interval, batch_size)
    return (f"I_eff = {interval} x {batch_size} / {PAPER_BATCH} = {scaled:g} ranks: I is given at the paper's batch "
            f"of {PAPER_BATCH} and scaled to this run's batch of {batch_size} pairs per process"
            + ("; below 1, every ordered pair enters L_rank." if scaled < 1 else "."))


def interval_derived(cfg) -> dict:
    """I_eff and the batch it is scaled to, for the run's summary and the model card."""
    return {"interval_eff": effective_interval(cfg.interval, cfg.batch_size), "interval_batch": cfg.batch_size}


def teacher_names(teacher: str) -> list[str]:
    """The teachers a teacher setting names: 'a,b' averages a's and b's cosines."""
    return [name.strip() for name in teacher.split(",")]


def check_teacher(value: str) -> str:
    """A teacher setting normalised ('a, b' -> 'a,b'), or one line saying what is wrong: an empty name, a teacher
    named twice (it would weigh double in the mean), 'score' among models (a gold column is not averaged with
    cosines), or a file where a model is meant (a score CSV belongs in the corpus). Names are resolved to models
    where the corpus is checked (core.cli.training)."""
    names = teacher_names(value)
    folder = next((joined for i in range(len(names)) for j in range(i + 2, len(names) + 1)
                   if Path(joined := ",".join(names[i:j])).expanduser().exists()), None)
    if folder is not None:
        raise UserError(f"{shorten(folder)} has a comma in its name, and commas separate teachers: rename the folder "
                        "(or link to it under a name without commas) and name that.")
    if "" in names:
        raise UserError(f"teacher {shorten(value)} has an empty name: give one teacher, or several separated by "
                        "commas (e.g. reference,models/all-mpnet-base-v2).")
    seen = [_identity(name) for name in names]
    twice = next((i for i, key in enumerate(seen) if key in seen[:i]), None)
    if twice is not None:
        first = names[seen.index(seen[twice])]
        # whole paths up to PATH_CHARS: cut at 40 characters, `/long/path/x` and `/long/path/x/` read the same
        again = ("" if first == names[twice] else
                 f" (as {shorten(first, PATH_CHARS)} and {shorten(names[twice], PATH_CHARS)}, one model)")
        raise UserError(f"teacher {shorten(names[twice])} is named twice in {shorten(value)}{again}; name each "
                        "teacher once.")
    if "score" in names and len(names) > 1:
        raise UserError(f"teacher 'score' (the pair corpus's own score column) cannot be averaged with models, got "
                        f"{shorten(value)}; give 'score' alone or only models.")
    file = next((name for name in names if Path(name).expanduser().is_file()), None)
    if file is not None:
        raise UserError(f"teacher {shorten(file)} is a file, not a model: a teacher is 'reference', 'score' (the "
                        "pair corpus's own score column) or a model name or folder.")
    return ",".join(names)


TEACHER_WORDS = ("reference", "score")  # teacher settings that name no model: the reference's cosine, the gold score


def _identity(name: str) -> str:
    """What a teacher name stands for: the model folder it resolves to, symbolic links and relative paths followed
    (so two spellings of one folder are one teacher), else the name itself ('reference', 'score', a hub id)."""
    if name in TEACHER_WORDS:
        return name
    from core.models.loading import resolve_model

    try:
        resolved = resolve_model(name)
    except UserError:
        return name
    path = Path(resolved).expanduser()
    return str(path.resolve()) if path.exists() else resolved


def _same_model(a: str, b: str) -> bool:
    """Whether two model names resolve to the same model; a name that resolves to none is refused elsewhere."""
    from core.models.loading import resolve_model

    try:
        return resolve_model(a) == resolve_model(b)
    except UserError:
        return False


def self_taught(teacher: str, model: str, reference: str | None) -> list[str]:
    """The teachers that are the model the run starts from ('reference' when the reference model is it)."""
    return [name for name in teacher_names(teacher) if name != "score"
            and _same_model(reference or model if name == "reference" else name, model)]


def self_distillation_note(teacher: str, model: str, reference: str | None) -> str | None:
    """One line where a teacher is the model the run starts from, None otherwise: the papers' teachers are other,
    stronger models (RAOE's two, ListMLE's DiffCSE), so s from the student's own start is self-distillation."""
    same = self_taught(teacher, model, reference)
    if not same:
        return None
    part = "" if len(same) == len(teacher_names(teacher)) else "partly "
    return (f"teacher {', '.join(same)} is {model}, the model this run starts from: {part}self-distillation (the "
            "papers' teachers are other, stronger models); for another, run `make mpnet` and set teacher to "
            "models/all-mpnet-base-v2, or to any model folder.")


def teacher_needs(cfg, corpus) -> str | None:
    """teacher 'score' reads the corpus's score column: only a pair corpus with one has it."""
    if cfg.teacher == "score" and (corpus.kind != "pairs" or corpus.columns.score is None):
        return "teacher 'score' needs a pair corpus with a score column; use teacher 'reference' or name a model."
    return None


def teacher_model(cfg, reference, name: str | None = None):
    """The frozen model whose cosine is the teacher's judgement: the reference model, or the one `name` (default:
    cfg.teacher, a single teacher) names."""
    from core.models.loading import load_model

    name = cfg.teacher if name is None else name
    if name == "reference":
        return reference
    teacher = load_model(name, cfg.device)
    teacher.requires_grad_(False)
    return teacher


def teacher_scores(cfg, reference, text1: list[str], text2: list[str], gold: np.ndarray | None,
                   progress: Progress | None = None) -> np.ndarray:
    """s for each pair: the gold score, or the teacher's cosine, the mean over several teachers (their embeddings
    come from the disk cache)."""
    from core.models.encode import encode_cached

    if cfg.teacher == "score":
        return gold.astype(np.float64)
    cosines = []
    for name in teacher_names(cfg.teacher):
        teacher = teacher_model(cfg, reference, name)
        a = encode_cached(teacher, text1, progress=progress)
        b = encode_cached(teacher, text2, progress=progress)
        a = a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)
        b = b / np.clip(np.linalg.norm(b, axis=1, keepdims=True), 1e-12, None)
        cosines.append((a * b).sum(axis=1))
    return np.mean(cosines, axis=0).astype(np.float64)


LOW_GATED_SHARE = 0.2  # about what a flipped direction gives (docs/definitions.md, RAOE): the angle term learns noise


def gated_share_warning(cfg, share: float | None) -> str | None:
    """One line where the run's angle term has (almost) nothing to learn from: the share of label-ordered pairs
    whose score agrees is undefined (every pair has the same label) or below LOW_GATED_SHARE; None otherwise or
    where the recipe has no angle term (raoe_rank)."""
    if cfg.recipe != "raoe_angle" and not getattr(cfg, "w_angle", 0.0):
        return None
    if share is None:
        return ("Every pair has the same label, so no pair is label-ordered and L_angle gates nothing: this run "
                "trains L_rank alone.")
    if share < LOW_GATED_SHARE:
        return (f"Only {share:.0%} of the label-ordered pairs have a score that agrees (about 70-90% when labels and "
                "scores point the same way): check that label 0 means most related, or the teacher.")
    return None


def angle_alone(cfg) -> bool:
    """Whether the run's only term is L_angle gated by the labels (raoe_angle, or raoe with w_rank 0 and a gate
    that reads labels): with every pair on one label it has no pair to order."""
    if cfg.recipe == "raoe_angle":
        return True
    return cfg.recipe == "raoe" and cfg.w_rank == 0 and cfg.gate != "score"


def ranked_pairs(cfg, corpus, reference, _fmt: str, progress: Progress | None = None):
    """(Dataset with sentence1, sentence2 and label = [s, l], stats) for a RAOE recipe, subsampled to cfg.examples
    (seed)."""
    import torch
    from datasets import Dataset

    from core.data.kinds import kind_of
    from core.data.mining import MiningSettings
    from core.losses.raoe import gated_share

    split = kind_of(corpus).train_pairs(corpus)  # a pair corpus's own; a labelled corpus's are mined
    if split is not None:
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
    if np.isnan(share) and angle_alone(cfg):
        raise UserError(f"Every pair has the same label, so L_angle orders no pair and this run ({cfg.recipe}, the "
                        "angle term alone) would train nothing: the model would come out unchanged. Give the pairs "
                        "an ordinal label column (NLI: entailment, neutral, contradiction), or train raoe or "
                        "raoe_rank, which rank the pairs by their score.")
    dataset = Dataset.from_dict({"sentence1": text1, "sentence2": text2,
                                 "label": np.stack([scores, ordinal], axis=1).tolist()})
    share = None if np.isnan(share) else round(share, 4)
    stats = {"format": "ranked pairs", "source": source, "teacher": cfg.teacher, "examples": len(dataset),
             "gated_share": share, "label_levels": sorted({int(v) for v in ordinal}),
             **({"warning": warning} if (warning := gated_share_warning(cfg, share)) else {})}
    return dataset, stats


def _loss(**fixed: float | str):
    """The RAOE loss with the run's settings; an ablation fixes some (a weight of 0 drops that term)."""
    def build(model, cfg):
        from core.losses.raoe import RAOELoss

        settings = {name: fixed[name] if name in fixed else getattr(cfg, name)
                    for name in ("tau", "interval", "w_rank", "w_angle", "gate")}
        settings["interval"] = effective_interval(settings["interval"], cfg.batch_size)
        return RAOELoss(model, **settings)
    return build


TEACHER = Param("teacher", str, "reference", "Teacher", TEACHER_HELP, check=check_teacher)
TAU = Param("tau", float, 20.0, "Scale tau", "Sharpness of both terms (1 / temperature); CoSENT's scale.",
            low=0.0, low_open=True, high=1000.0)
INTERVAL = Param("interval", int, 2, "Rank margin I", "A pair enters L_rank only with a pair more than I ranks "
                 f"above it. I is given at the paper's batch of {PAPER_BATCH} and scaled to the run's, I_eff = I x "
                 f"batch / {PAPER_BATCH}: in rank units the same I would leave out a larger share of a smaller "
                 "batch (I = 2: ~0.8% of the ordered pairs at 512, ~12% at 32).", low=0, high=10_000,
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
           needs=teacher_needs, derived=interval_derived),
    Recipe("raoe_rank", "RAOE ablation: L_rank only", "ranked pairs", _loss(w_rank=1.0, w_angle=0.0, gate="both"),
           examples=ranked_pairs, knob="interval", params=(INTERVAL, TEACHER, TAU, *MINING), kinds=_KINDS,
           needs=teacher_needs, derived=interval_derived),
    Recipe("raoe_angle", "RAOE ablation: L_angle only", "ranked pairs",
           _loss(interval=0, w_rank=0.0, w_angle=1.0, gate="both"), examples=ranked_pairs,
           params=(TEACHER, TAU, *MINING), kinds=_KINDS, needs=teacher_needs),
]
