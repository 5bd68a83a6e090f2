"""Training: turning a config into a fine-tuned, saved model.

- ``recipes``: the registry of training objectives: ``RECIPES``, ``get_recipe``, ``Recipe``.
- ``trainer``: ``TrainConfig``, example preparation, freezing, pooling, the sentence-transformers trainer
  with progress / cancel, before / after evaluation: ``run_training``, ``make_trainer``, ``prepare_examples``.
- ``card``: the ContrastLab section of the saved model card: ``contrastlab_card_section``.
"""
