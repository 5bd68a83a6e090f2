"""Generated training data (seed 003's ranked lists, seed 004's graded negatives), free of Streamlit.

- ``engines``: where text comes from: a local causal LM folder (transformers) or an OpenAI-compatible endpoint
  (the openai client); only the local one can do directional control.
- ``lists``: seed 003's lists by directional control, step by step, or from one prompt, with the rule-based check.
- ``negatives``: seed 004's four negatives per query in decreasing similarity: the prompt, the lenient reading
  of the answer and its retries.
- ``items``: a generation as cached items, made `concurrency` at a time, cancellable without losing one.
- ``run``: a source file to an output file the recipes train on, with its sidecar.
- ``job``: a generation as a background run (kind "generate"), as the Generate page starts one: ``run_job``,
  ``generation_config``.
- ``quality``: what generated data is worth before training on it, by an independent reference model: lists'
  cosine to the anchor by position, seed 004's Table 4 for negatives, leakage into a test split.
"""
