"""Analysis: reference vs fine-tuned comparisons behind the pages, free of Streamlit.

- ``projection``: aligned t-SNE / UMAP maps with a disk cache: ``aligned_maps``, ``tsne``, ``umap_2d``,
  ``subsample``, ``neighbour_changes``, ``affinities`` (t-SNE input from FAISS neighbours), and the alignment
  measures ``neighbours_kept``, ``map_knn_accuracy``.
- ``maps``: the Maps page's (and ``python -m core maps``') data, figures and files: ``map_data``, ``map_figures``,
  ``neighbours``, ``available_points``, ``point_options``, ``write_maps``, ``output_dir``, ``MAX_POINTS``.
- ``layers``: the Layers page's per-layer kNN curves, CKA to the reference per run, and their figures:
  ``layer_curves``, ``layers_figure``, ``cka_curves``, ``cka_layers_figure``.
- ``tradeoff``: P@k / S@k points of every run, the margin's active-triplet share, a metric before and after
  per run (STS Spearman, ordering): ``tradeoff_points``, ``margin_constraint_share``, ``metric_changes``,
  ``change_table``.
- ``attention``: attention and ATA weights of one text, reference vs fine-tuned: ``token_weights``,
  ``compare_attention``.
- ``plots``: plotly figure builders (pure functions returning ``go.Figure``), and ``map_png`` (a map as a PNG
  with matplotlib, for files written without a browser).
"""
