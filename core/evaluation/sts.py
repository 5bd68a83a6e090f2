"""STS evaluation of a pair corpus: how well the model's cosine ranks pairs like the gold similarity score."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from core.data.mining import unit_rows
from core.data.pairs import PairCorpus
from core.errors import UserError
from core.evaluation.items import ITEMS, ITEMS_OF, canonical
from core.models.encode import encode_cached


# Cosines are rounded before they are ranked: a pair whose two texts the model reads alike (they differ in case only,
# for an uncased model) has a cosine of 1 up to float noise (0.9999999 to 1.0000002), and STS Spearman ranked that
# noise (41.42 on a corpus where tying those pairs gives 41.80).
COSINE_DECIMALS = 6


def pair_texts(pairs: PairCorpus) -> list[str]:
    """The distinct texts of the target pairs, in first-seen order: what one STS evaluation encodes."""
    return list(dict.fromkeys([*pairs.test.text1, *pairs.test.text2]))


def pair_cosines(model, pairs: PairCorpus, batch_size: int = 64,
                 progress: Callable[[int, int], None] | None = None) -> np.ndarray | None:
    """The model's cosine of each target pair, rounded to COSINE_DECIMALS; None without a score column (nothing to
    rank against).

    Every distinct text is encoded once, through the embedding cache: a run's before-evaluation and the Corpus page
    read the reference's pass instead of encoding the pairs again.
    """
    if pairs.columns.score is None:
        return None
    target = pairs.test
    if len(set(target.scores.tolist())) < 2:
        raise UserError(f"Every pair of the {pairs.target_split} split has the same score, so a rank correlation "
                        "with it is undefined; check the score column.")
    texts = pair_texts(pairs)
    emb = unit_rows(encode_cached(model, texts, batch_size=batch_size, progress=progress))
    row = {text: i for i, text in enumerate(texts)}
    first = emb[[row[t] for t in target.text1]]
    second = emb[[row[t] for t in target.text2]]
    _check_seen_apart(model, target.text1, target.text2, pairs.target_split)
    return np.round((first * second).sum(axis=1), COSINE_DECIMALS)


def _check_seen_apart(model, text1: list[str], text2: list[str], split: str) -> None:
    """Refuse target pairs whose two texts the model reads as the same tokens (an uncased model and a case-only
    change, doubled spaces): their cosines are 1 up to rounding, and STS Spearman would rank that noise. Compared as
    the model's tokenizer sees them, so a degenerate model whose cosines are all near 1 is not mistaken for it."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not text1:
        return
    texts = list(dict.fromkeys([*text1, *text2]))
    ids = dict(zip(texts, map(tuple, tokenizer(texts, add_special_tokens=False, truncation=False,
                                               return_attention_mask=False)["input_ids"])))
    if all(ids[a] == ids[b] for a, b in zip(text1, text2)):
        raise UserError(f"The model reads the two texts of every {split} pair as the same tokens (they differ only "
                        "in case, spacing or accents, which its tokenizer drops), so every cosine is 1 and STS "
                        "Spearman would rank rounding noise; check the pairs.")


def sts_scored(model, pairs: PairCorpus, progress: Callable[[int, int], None] | None = None) -> dict:
    """STS Spearman on the target pairs, with each pair's cosine and gold score kept for paired comparisons
    (core.evaluation.items); {"sts_spearman": None} without a score column."""
    cosine = pair_cosines(model, pairs, progress=progress)
    if cosine is None:
        return {"sts_spearman": None}
    from scipy.stats import spearmanr  # 1 s to import: not for a figure read from the cache

    gold = np.asarray(pairs.test.scores, dtype=np.float64)
    key, order = canonical("pairs", [(min(a, b), max(a, b), g)  # either way round: cosine is symmetric
                                     for a, b, g in zip(pairs.test.text1, pairs.test.text2, gold.tolist())])
    return {"sts_spearman": 100 * float(spearmanr(cosine, gold).statistic),
            ITEMS: {"sts_cos": cosine.astype(np.float32), "sts_gold": gold, **order}, ITEMS_OF: {"pairs": key}}


def sts_spearman(model, pairs: PairCorpus, batch_size: int = 64,
                 progress: Callable[[int, int], None] | None = None) -> float | None:
    """Spearman correlation x 100 between cosine and gold score on the target split; None without a score column.
    The figure sentence-transformers' EmbeddingSimilarityEvaluator gives (cosine of each pair, scipy's Spearman;
    tests/test_sts.py checks they agree)."""
    cosine = pair_cosines(model, pairs, batch_size, progress)
    if cosine is None:
        return None
    from scipy.stats import spearmanr

    return 100 * float(spearmanr(cosine, np.asarray(pairs.test.scores, dtype=np.float64)).statistic)


def evaluate_pairs(model, pairs: PairCorpus, model_name: str,
                   progress: Callable[[int, int], None] | None = None) -> dict:
    """What a pair corpus is judged by, shaped like evaluate()'s result: STS Spearman on its target split."""
    return {"kind": "pairs", "model": model_name, **sts_scored(model, pairs, progress),
            "n_pairs": len(pairs.test), "target_split": pairs.target_split}
