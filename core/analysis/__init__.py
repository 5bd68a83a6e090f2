"""Analysis: reference vs fine-tuned comparisons behind the pages, free of Streamlit.

- ``projection``: aligned t-SNE / UMAP maps with a disk cache: ``aligned_maps``, ``tsne``, ``umap_2d``,
  ``project``, ``subsample``, ``neighbour_changes``, ``neighbourhood_change``, ``fit_onto``, ``affinities`` (t-SNE
  input from FAISS neighbours), and the alignment measures ``neighbours_kept``, ``map_knn_accuracy``.
- ``maps``: the Maps page's (and ``python -m core maps``') data, figures and files: ``map_data``, ``map_figures``,
  ``neighbours``, ``available_points``, ``point_options``, ``write_maps``, ``output_dir``, ``MAX_POINTS``.
- ``layers``: the Layers page's per-layer kNN curves, CKA to the reference per run, and their figures:
  ``layer_curves``, ``layers_figure``, ``cka_curves``, ``cka_layers_figure``.
- ``tradeoff``: P@k / S@k points of every run (labelled, runs that differ only in seed as one point), the
  margin's active-triplet share, a metric before and after per run (STS Spearman, ordering): ``tradeoff_points``,
  ``seed_groups``, ``point_label``, ``budget_text``, ``approximate_ci``, ``margin_constraint_share``,
  ``mined_triplet_counts``, ``triplet_count_note``, ``metric_changes``, ``change_table``.
- ``attention``: every layer's attention per head from one pass, and the ATA weights of one text, reference vs
  fine-tuned: ``read_attention``, ``layer_attention``, ``compare_attention``, ``weight_changes``.
- ``generation_plots``: generated data's quality before training: ``list_curve_figure`` (cosine to the anchor by
  position, per method) and ``negatives_figure`` (seed 004's Table 4, beside the published means).
- ``per_class_plots``: ``confusion_figure``, the kNN confusion matrix as a row-normalised heatmap.
- ``plots``: plotly figure builders (pure functions returning ``go.Figure``), and ``map_png`` (a map as a PNG
  with matplotlib, for files written without a browser).
"""
