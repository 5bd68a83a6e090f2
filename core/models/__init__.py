"""Models: finding, loading and running sentence-transformers models.

- ``loading``: local directory > packaged model > hub id, device choice, weights fingerprint:
  ``load_model``, ``resolve_model``, ``pick_device``, ``check_device``, ``visible_gpus``, ``layer_count``,
  ``model_fingerprint``.
- ``encode``: one forward pass per batch through the model's own modules for pooled embeddings, every layer's
  mean and attentions, with a disk cache: ``encode``, ``encode_cached``, ``count_overlong``, ``eager_attention``
  (attention probabilities need eager kernels).
- ``ata``: anchor-token-aware pooling as sentence-transformers modules: ``ATATransformer``, ``ATAPooling``,
  ``ata_weights``, ``build_ata_model``, ``load_allowing_ata``.
"""
