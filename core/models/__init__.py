"""Models: finding, loading and running sentence-transformers models.

- ``loading``: local directory > packaged model > hub id, device choice, weights fingerprint:
  ``load_model``, ``resolve_model``, ``pick_device``, ``check_device``, ``visible_gpus``, ``layer_count``,
  ``model_type``, ``supports_top_layers`` (the architectures a quick point can train the top layers of alone),
  ``model_fingerprint``.
- ``encode``: one forward pass per batch through the model's own modules for pooled embeddings, every layer's
  mean and attentions, with a disk cache, batching texts longest first by token count: ``encode``, ``encode_cached``,
  ``longest_first``, ``token_counts``, ``count_overlong``, ``eager_attention``
  (attention probabilities need eager kernels); ``encode_batch`` is one batch's forward, the unit a pool worker runs;
  ``graph_batch`` the same batch through the model's ONNX graph.
- ``encode_pool``: on CPU, encode's batches spread over persistent single-thread worker processes (two of them encode
  about 2x as fast as one process on two threads on a busy 2-core machine), used when ``pool_size`` says so:
  ``pool_size``, ``workers``, ``pool_for``, ``shutdown``, ``EncodePool``, ``WorkerError``.
- ``engine``: ONNX Runtime for the passes that do not train, a graph exported per weights fingerprint and used where
  it reproduces torch within ``TOLERANCE``: ``Graph``, ``encoder_graph``, ``below_graph``, ``applies``, ``choice``,
  ``mean_pool``.
- ``threads``: torch's CPU threads sized from the cores other work leaves free (oversubscribed threads collapse):
  ``usable_cores``, ``free_cores``, ``threads_for_free_cores``.
- ``rates``: this machine's measured encoding rate per architecture, for ETAs: ``encode_rate``, ``record_rate``,
  ``EncodeClock``.
- ``ata``: anchor-token-aware pooling as sentence-transformers modules: ``ATATransformer``, ``ATAPooling``,
  ``ata_weights``, ``build_ata_model``, ``load_allowing_ata``.
"""
