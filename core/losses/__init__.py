"""Losses: our own training objectives, one ``nn.Module`` per module, shaped like sentence-transformers' losses
(``forward(sentence_features, labels)``, ``compute_loss_from_embeddings``, ``get_config_dict``, ``citation``).

- ``raoe``: the rank-margin + gated angular loss on pairs labelled with a score and an ordinal label:
  ``RAOELoss``, ``GATES``, ``batch_ranks``, ``rank_pair_mask``, ``gate_pair_mask``, ``gated_share``.
- ``listmle``: ListMLE for a bi-encoder over ranked lists, chain (every member an anchor) or star (member 0 the one
  anchor): ``ListMLELoss``, ``listmle_from_scores``, ``SHAPES``, and the targets it learns: ``nudged_targets``
  (phihat, Algorithm 1), ``order_targets``, ``pack_label``.
- ``mgh``: MultipleNegativesRankingLoss over the anchor, the positive and the current band's hard negative:
  ``BandedMNRLoss``.
"""
