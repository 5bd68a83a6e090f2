"""The dataset builders a recipe chooses from: examples mined with the frozen reference model (supervised) or
pairs cut from multi-sentence documents (self-supervised). Each returns (datasets.Dataset, stats).

Data, mining and evaluation are imported inside the builders: they load torch and FAISS, and the recipe registry
that names these builders is read by the CLI and the pages long before any example is built.
"""

from __future__ import annotations

from collections.abc import Callable

from core.errors import UserError

Progress = Callable[[int, int], None]


def mined_examples(cfg, corpus, reference, fmt: str, progress: Progress | None = None):
    """Label-aware examples in format `fmt` (core.data.mining), subsampled deterministically to cfg.examples; on a
    corpus whose kind holds train pairs (a pair corpus), those pairs scored."""
    from core.data.kinds import kind_of
    from core.data.mining import MiningSettings

    if kind_of(corpus).train_pairs(corpus) is not None:
        return scored_pairs(cfg, corpus, fmt)

    settings = MiningSettings(k=cfg.mine_k, threshold=cfg.threshold, max_examples=cfg.examples, seed=cfg.seed)
    examples = mine_train_sample(reference, corpus, fmt, settings, progress)
    return examples.to_dataset(), examples.stats


def scored_pairs(cfg, corpus, fmt: str):
    """A pair corpus's train pairs with their gold score rescaled to [0, 1] (order kept), for the cosine-format
    recipes (CoSENT, AnglE, cosine similarity), subsampled deterministically to cfg.examples. Without a score column
    (CoSENT and AnglE only, which read just the order: recipe.needs_order), the NLI labels give it: entailment 1,
    neutral 0.5, contradiction 0."""
    import numpy as np
    from datasets import Dataset

    split = corpus.train
    if len(split) == 0:
        raise UserError(f"{corpus.name} has no train pairs to learn from.")
    by_label = corpus.columns.score is None
    values = (2 - split.labels) / 2 if by_label else split.scores  # labels: 0 = entailment, the most related
    low, high = float(np.min(values)), float(np.max(values))
    scores = (values - low) / (high - low) if high > low else np.full(len(split), 0.5)
    rows = np.arange(len(split))
    if len(rows) > cfg.examples:
        rows = np.sort(np.random.default_rng(cfg.seed).choice(len(rows), cfg.examples, replace=False))
    dataset = Dataset.from_dict({"sentence1": [split.text1[i] for i in rows],
                                 "sentence2": [split.text2[i] for i in rows], "score": scores[rows].tolist()})
    source = "pair corpus, NLI labels as scores (entailment 1, neutral 0.5, contradiction 0)" if by_label else \
        "pair corpus"
    return dataset, {"format": fmt, "source": source, "examples": len(dataset), "score_range": [low, high]}


def document_pairs(cfg, corpus, _reference, fmt: str, _progress: Progress | None = None):
    """Two crops ("crop") or the same crop twice ("dropout") of each multi-sentence document."""
    from core.data.crops import crop_pairs, dropout_pairs, load_documents, to_dataset

    # The corpus's own train split keeps its test texts unseen; a separate documents file is used whole.
    texts = load_documents(cfg.documents) if cfg.documents else corpus.train_texts
    make = crop_pairs if fmt == "crop" else dropout_pairs
    pairs = make(texts, t=cfg.crop_t, seed=cfg.seed, pairs_per_doc=cfg.pairs_per_doc)
    if len(pairs.anchors) == 0:
        raise UserError("No document has two chunks of sentences of 100-250 characters; crops need "
                        "multi-sentence documents (pass --documents).")
    dataset = to_dataset(pairs)
    if len(dataset) > cfg.examples:
        dataset = dataset.shuffle(seed=cfg.seed).select(range(cfg.examples))
    stats = {"format": fmt, "documents": pairs.n_docs, "skipped_docs": pairs.skipped_docs, "examples": len(dataset)}
    return dataset, stats


def mine_train_sample(reference, corpus, fmt: str, settings, progress: Progress | None = None):
    """Mine among the train sample the evaluation encodes (all train rows up to knn_train_max), so the
    reference embeddings come from the cache instead of a second pass over a large corpus."""
    from core.data.mining import mine
    from core.evaluation.evaluate import EvalSettings, eval_sets

    sets = eval_sets(corpus, EvalSettings())
    return mine(reference, sets.train_texts, sets.train_labels, fmt, settings, corpus_fp=sets.key, progress=progress)
