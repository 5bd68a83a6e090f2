"""Analysis: reference vs fine-tuned comparisons behind the pages, free of Streamlit.

- ``projection``: aligned t-SNE / UMAP maps with a disk cache: ``aligned_maps``, ``tsne``, ``umap_2d``,
  ``subsample``, ``neighbour_changes``.
- ``compare``: data for the Maps and Layers pages: ``map_data``, ``neighbours``, ``layer_curves``.
- ``tradeoff``: P@k / S@k points of every run, the margin's active-triplet share, quick runs:
  ``tradeoff_points``, ``margin_constraint_share``, ``quick_run``.
- ``attention``: attention and ATA weights of one text, reference vs fine-tuned: ``compare_attention``.
- ``plots``: plotly figure builders (pure functions returning ``go.Figure``).
"""
