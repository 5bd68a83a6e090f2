"""ListMLE post-training recipe (docs/definitions.md, ListMLE post-training; seed 003): a model learns the order of
ranked lists, its target being a frozen teacher's similarities nudged toward each list's order by w.

The lists come from the run's corpus (core.data.lists): a list file as it is (a chain list unless list_shape says
star), NLI pairs (premise; entailment > neutral > contradiction > another premise's hypothesis) or a labelled corpus
(same-label neighbours before other-label neighbours of the reference model), both star lists. Their order never
comes from the teacher, which would make the method self-distillation.

Data, models and the loss are imported inside the functions: the recipe registry is read by the CLI and the pages
before any training.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.errors import UserError
from core.training.examples import Progress
from core.training.params import Param
from core.training.raoe import check_teacher, teacher_model, teacher_names
from core.training.recipe import Recipe

TARGETS = ("nudged", "order")


def list_needs(cfg, corpus) -> str | None:
    """A pair corpus gives lists through its NLI labels, unless a lists file trains (cfg.lists: then the corpus is
    only evaluated, and the file is read now); the teacher is a model (lists have no score column); the list size
    applies only where lists are built from a labelled corpus (a value other than the default is refused elsewhere,
    as a setting of another recipe is)."""
    if cfg.lists:
        from core.data.lists import load_lists

        load_lists(cfg.lists)  # a UserError where the file cannot train
    if corpus.kind == "pairs" and corpus.columns.label is None and not cfg.lists:
        return (f"listmle builds lists from a pair corpus's NLI labels (entailment / neutral / contradiction), which "
                f"{corpus.name} lacks; upload lists (list_id, rank, text) or use a labelled corpus.")
    if cfg.teacher == "score":
        return "listmle's teacher is a model: 'reference' or a model name or folder (lists carry no score column)."
    if (corpus.kind != "labelled" or cfg.lists) and cfg.list_size != LIST_SIZE.default:
        source = (f"the lists come from the lists file {Path(cfg.lists).name}" if cfg.lists else
                  f"this {corpus.kind[:-1]} corpus's lists come from its "
                  + ("list file" if corpus.kind == "lists" else "NLI labels"))
        return f"list_size sets how lists are built from a labelled corpus; {source}, so leave list_size out."
    return None


def as_lists(cfg, corpus, reference, progress: Progress | None = None):
    """The run's corpus as ranked lists: a list corpus as it is, NLI lists of a pair corpus, neighbour lists of a
    labelled corpus (up to cfg.examples anchors from the train sample the evaluation encodes); its shape is the
    list file's list_shape, star for the lists built here. None where a lists file trains and the corpus (pairs
    without NLI labels) has no lists to score."""
    from core.data.kinds import kind_of

    if cfg.lists and corpus.kind == "pairs" and corpus.columns.label is None:
        return None
    from core.evaluation.corpus_eval import Scorer

    return kind_of(corpus).as_lists(corpus, Scorer(reference=reference), cfg.list_size, cfg.examples, cfg.seed,
                                    progress)


def targets_for(cfg, phi: np.ndarray, shape: str) -> np.ndarray:
    """phihat for one list of this shape from the teacher's similarities phi (members in list order)."""
    from core.losses.listmle import nudged_targets, order_targets

    return order_targets(len(phi)) if cfg.target == "order" else nudged_targets(phi, cfg.w, shape)


def list_examples(cfg, corpus, reference, _fmt: str, progress: Progress | None = None):
    """(Dataset with one text column per list member, m0 first, and label = phihat + presence mask + anchor mask
    (pack_label), stats), the training lists subsampled to cfg.examples (seed)."""
    from datasets import Dataset

    from core.data.mining import unit_rows
    from core.evaluation.ordering import in_order, ordered_rows
    from core.losses.listmle import pack_label
    from core.models.encode import encode_cached

    if cfg.lists:  # a lists file trains (all of it: it is training data), the corpus is only evaluated
        from core.data.lists import load_lists

        lists = load_lists(cfg.lists)
        pool = lists.train.lists + lists.test.lists
    else:
        lists = as_lists(cfg, corpus, reference, progress)
        pool = lists.train.lists
        if not pool:
            raise UserError(f"{lists.name} has no training lists; give it a split column with 'train' rows, or drop "
                            "the split column to hold out 10% of the lists.")
    rows = np.arange(len(pool))
    if len(rows) > cfg.examples:
        rows = np.sort(np.random.default_rng(cfg.seed).choice(len(rows), cfg.examples, replace=False))
    chosen = [pool[i] for i in rows]
    texts = list(dict.fromkeys(t for members in chosen for t in members))
    teachers = [unit_rows(encode_cached(teacher_model(cfg, reference, name), texts, progress=progress))
                for name in teacher_names(cfg.teacher)]  # several teachers: the mean of their cosines, as RAOE's
    position = {t: i for i, t in enumerate(texts)}
    size = max(len(members) for members in chosen)
    columns: dict[str, list] = {f"m{i}": [] for i in range(size)}
    columns["label"] = []
    agree, nudged, preview = 0, 0, None
    for members in chosen:
        at = [position[t] for t in members]
        phi = np.mean([emb[at] @ emb[at].T for emb in teachers], axis=0)
        targets = targets_for(cfg, phi, lists.shape)
        agree += in_order(ordered_rows(phi, lists.shape))  # on the rows the ordering metrics score
        nudged += in_order(ordered_rows(targets, lists.shape))
        for i in range(size):
            columns[f"m{i}"].append(members[i] if i < len(members) else "")
        columns["label"].append(pack_label(targets, size, lists.shape))
        if preview is None:
            preview = list_preview(members, phi, targets)
    stats = {"format": "ranked lists", "source": lists.report.source, "shape": lists.shape, "teacher": cfg.teacher,
             "target": cfg.target, "examples": len(chosen), "list_size": [min(map(len, chosen)), size],
             "teacher_in_order": round(agree / len(chosen), 4), "target_in_order": round(nudged / len(chosen), 4),
             "loss": f"ListMLE on {lists.shape} lists, summed over each list's anchors ("
                     + ("every member" if lists.shape == "chain" else "its first member only")
                     + ") and averaged over the lists of a batch",
             "preview": preview}
    if cfg.lists:
        from core.data.provenance import generation_summary

        stats |= {"lists_file": Path(cfg.lists).name, "available": len(pool)}
        if (generated := generation_summary(cfg.lists)) is not None:
            stats["generated"] = generated
    return Dataset.from_dict(columns), stats


def list_preview(members: list[str], phi: np.ndarray, targets: np.ndarray) -> list[dict]:
    """The anchor's row: each member's list rank, the teacher's cosine and rank, the target and its rank."""
    others = np.arange(1, len(members))
    teacher_rank = np.empty(len(others), dtype=int)
    teacher_rank[np.argsort(-phi[0, others], kind="stable")] = np.arange(2, len(members) + 1)
    target_rank = np.empty(len(others), dtype=int)
    target_rank[np.argsort(-targets[0, others], kind="stable")] = np.arange(2, len(members) + 1)
    return [{"rank": int(k + 1), "text": members[k], "teacher": round(float(phi[0, k]), 4),
             "teacher_rank": int(teacher_rank[k - 1]), "target": round(float(targets[0, k]), 4),
             "target_rank": int(target_rank[k - 1])} for k in others]


def _loss(model, cfg):
    from core.losses.listmle import ListMLELoss

    return ListMLELoss(model, tau=cfg.tau, with_anchor=cfg.anchor_in_list)


W = Param("w", float, 0.5, "Nudge weight w", "How far the teacher's similarities move toward the list order: "
          "log(w |gap| + 1); 0 keeps the teacher's own order.", low=0.0, high=100.0, presets=(0.0, 0.25, 0.5, 1.0, 2.0))
TARGET = Param("target", str, "nudged", "Target order", "'nudged': the teacher's similarities nudged toward the "
               "list order by w; 'order': the list order alone (ablation).", choices=TARGETS)
TEACHER = Param("teacher", str, "reference", "Teacher", "The frozen model whose similarities are nudged: "
                "'reference' (the reference model) or a model name or folder; several, separated by commas, average "
                "their cosines.", check=check_teacher)
TAU = Param("tau", float, 0.05, "Temperature tau", "Cosines are divided by tau before ListMLE. 0.05 by default, a "
            "deviation: the paper has no temperature (tau 1), and at tau 1 every setting measured in bench listmle "
            "lost STS and list order within 30 steps; 1 gives the paper's loss.", low=0.0, low_open=True, high=10.0,
            step=0.01)
ANCHOR_IN_LIST = Param("anchor_in_list", bool, False, "Anchor term", "Rank each anchor's similarity "
                       "with itself first in its own list, as the paper's Eq. 8 writes it (s_j1 .. s_jn, s_jj "
                       "included). Off by default, a deviation: s_jj is always 1, so its term only pushes every "
                       "member's cosine down against a fixed top, which the list order says nothing about.")
LIST_SIZE = Param("list_size", int, 8, "List size", "On a labelled corpus: members after each anchor, its "
                  "list_size // 2 nearest same-label texts, then its nearest other-label texts.", low=2, high=63)

LISTS_FILE = Param("lists", str, None, "Lists file", "Train on a list file's lists (list_id, rank, text; python -m "
                   "core generate lists writes one), every list in it, instead of the corpus's own lists; the corpus "
                   "is still evaluated before and after.", optional=True, file=True)

LISTMLE = [
    Recipe("listmle", "ListMLE post-training on ranked lists", "ranked lists", _loss, examples=list_examples,
           knob="w", params=(W, TARGET, TEACHER, TAU, ANCHOR_IN_LIST, LIST_SIZE, LISTS_FILE), budget={"batch_size": 16},
           min_batch_size=1,
           kinds=("lists", "pairs", "labelled"), needs=list_needs, lists=as_lists),
]
