"""Training: turning a config into a fine-tuned, saved model.

- ``params``: the parameter schema every setting is described by (CLI flags, page widgets, validation, card):
  ``Param``.
- ``recipe``: what one training objective declares (settings, knob, examples, loss, batch sampler, budget,
  callbacks that may steer the loss, loss-curve phases, settings shown in run labels, values derived from the
  settings, the budget its paper reports): ``Recipe``, ``PaperBudget``, ``MINING``.
- ``supervised``: the recipes on mined examples (triplet, contrastive, MNRL, cosine, CoSENT, AnglE):
  ``SUPERVISED``.
- ``self_supervised``: the recipes on document pairs (crop, dropout): ``SELF_SUPERVISED``.
- ``raoe``: the RAOE recipes (full, L_rank only, L_angle only) on pairs scored by a teacher (or the mean of
  several), the rank margin given at the paper's batch and scaled to the run's: ``RAOE``, ``ranked_pairs``,
  ``teacher_scores``, ``teacher_model``, ``teacher_names``, ``check_teacher``, ``self_distillation_note``,
  ``effective_interval``, ``PAPER_BATCH``.
- ``listmle``: ListMLE post-training on ranked lists with the teacher's nudged similarities as target:
  ``LISTMLE``, ``as_lists``, ``list_examples``.
- ``mgh``: InfoNCE with one hard negative per anchor from four reference-cosine bands, scheduled by an order
  (curriculum N4 -> N1, random, reverse, fixed): ``MGH``, ``ORDERS``, ``band_at``, ``band_phases``,
  ``band_callback``, ``banded_examples``.
- ``recipes``: the registry: ``RECIPES``, ``register``, ``get_recipe``, ``recipe_params``.
- ``examples``: the dataset builders recipes use: ``mined_examples``, ``scored_pairs``,
  ``document_pairs``, ``mine_train_sample``.
- ``config``: ``TrainConfig``, the general settings ``GENERAL`` and the one validation of a run's settings;
  ``nproc_choice`` (the Train page's process count).
- ``trainer``: freezing, pooling, the sentence-transformers trainer with progress / cancel, before / after
  evaluation: ``run_training``, ``make_trainer``, ``freeze``, ``total_steps``, ``record_result``,
  ``SilentReporter``.
- ``distributed``: rank helpers of a run over several processes (PyTorch DDP): ``world_size``, ``rank``,
  ``is_main``, ``local_rank``, ``rank_device``, ``backend``, ``init``, ``broadcast``,
  ``share_examples``, ``examples_digest``, ``training_ended``, ``log``, ``StopSync``, ``TIMEOUT``.
- ``eta``: the whole-run ETA of a training run (remaining steps, the evaluations still to come, saving) from
  what the run measured, and a planned run's from this machine's encoding rate: ``RunEta``, ``EncodeShare``,
  ``save_seconds``, ``planned_seconds``, ``fmt_seconds``.
- ``paper_budget``: the Train page's note where a recipe's default budget differs from its paper's, with the
  paper budget's ETA on this machine: ``paper_budget_note``, ``paper_budget_note_for``.
- ``top_layers``: training only the top n layers from the frozen part's cached output (the quick margin point's
  fast path): ``top_layers_view``, ``split_layer``, ``TopLayers`` (which architectures can:
  ``core.models.loading.supports_top_layers``).
- ``packing``: padding-free training steps (a batch's texts several to a row under a block-diagonal mask) for
  BERT-style models on the CPU: ``packed_training``, ``Packed``, ``Pack``, ``packs``, ``run_packed``, ``StandIn``
  (what TopLayers and Packed share as a Hugging Face model's stand-in).
- ``selection``: picking a run's checkpoint, step 0 included, by the STS Spearman of a split of its STS corpus:
  ``CheckpointSelection``, ``selection_pairs``.
- ``card``: the saved model card, led by what the run did, with sentence-transformers' card data filled:
  ``save_with_card``, ``fill_card_data``, ``contrastlab_card_section``.
"""
