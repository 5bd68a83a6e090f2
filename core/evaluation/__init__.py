"""Evaluation: the numbers a run is judged by.

- ``metrics``: pure numpy + FAISS on embeddings: ``polarity_similarity`` (P@k / S@k), ``knn_accuracy``,
  ``layerwise_knn_accuracy``, ``linear_cka``, ``linear_probe_accuracy``, ``search``.
- ``pareto``: ``pareto_front`` of (P, S) points.
- ``headline``: ``HEADLINE``, the metrics every table and card shows, with their names and units; ``DISCOUNTS``,
  the rank weightings of P@k / S@k.
- ``evaluate``: which texts are scored, encoded through the cache, and scored: ``evaluate``, ``evaluate_layers``,
  ``layer_states``, ``layer_cka``, ``compare_layers``,
  ``EvalSettings``, ``eval_sets``, ``score``.
- ``ordering``: how well a model orders held-out ranked lists, on the rows their shape orders (a star list's
  anchor, every anchor of a chain list): ``ordering_metrics`` (ordering accuracy, Kendall tau), ``ordering_scores``,
  ``list_scores``, ``ordered_rows``, ``in_order``, ``evaluate_lists``.
- ``reranking``: a negatives file's reranking accuracy (the positive above all four negatives), each query's
  outcome kept for paired comparisons: ``rerank_metrics``.
- ``sts``: Spearman x 100 of cosine against a pair corpus's gold score: ``sts_spearman``, ``sts_scored`` (with each
  pair's cosine), ``pair_cosines``.
- ``changes``: the test items that changed between two evaluations (flipped kNN votes with their neighbours, pairs
  by rank-error growth, lists that lost their order): ``changed_items``, ``flip_status``, ``rank_error``, ``FLIPS``.
- ``per_class``: per-class P@k, kNN recall and the kNN confusion matrix of an evaluation (``per_class``,
  ``per_class_frame``, ``confusion_counts``), stored under ``"per_class"`` by ``score``.
- ``uncertainty``: how sure P@k / S@k are: ``standard_error``, ``bootstrap_mean_ci``, ``target_intervals``
  (stored under ``"uncertainty"`` by ``score``), ``interval``, ``ERROR_BARS``.
- ``corpus_eval``: one evaluation for every corpus kind, its result cached per (model, reference, corpus,
  settings): ``evaluate_corpus``, ``evaluation_texts``.
- ``items``: what each test item scored in an evaluation (P and S per text, the kNN vote and neighbours, cosine per
  pair, order per list), stored beside the cached result, named by the items' content and the conditions the figures
  were computed under: ``save``, ``load``, ``load_canonical``, ``canonical``, ``same_items``, ``conditions``,
  ``GROUPS``.
- ``paired``: is a difference real? Paired bootstrap intervals and p-values of b - a over the same test items, and
  McNemar for right / wrong figures, only like with like and not below MIN_ITEMS items: ``compare``, ``compared``
  (cached), ``change_texts``, ``paired_bootstrap``, ``interval_and_p``, ``figure_name``, ``mcnemar``, ``FIGURES``,
  ``Difference``.
- ``published``: reference figures from elsewhere ("published: 77.6 on this test set"), stored per corpus
  fingerprint in the home and drawn beside ours: ``published``, ``beside`` (the caveat of a P@k / S@k measured
  another way), ``set_published``, ``remove_published``, ``Published``, ``figure_sets``.
- ``evaluator``: the same scoring as a sentence-transformers evaluator, run during training: ``TradeoffEvaluator``.
"""
