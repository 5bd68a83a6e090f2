"""Runs: the record of every run and what can be taken away from it.

- ``store``: the SQLite run store and artefact folders: ``RunStore``, ``Run``, ``pid_alive``, ``TMP_NAME``,
  ``clean_tags`` (a run's note and tags: ``RunStore.annotate``).
- ``labels``: how a run is named everywhere: ``run_label``, ``knob_text``, ``own_settings_text``, ``knob_value``,
  ``run_reference``, ``corpus_names``, and the Runs page's filters: ``select_runs``.
- ``export``: a finished run's model (zip, card), config, embeddings and the TensorBoard projector's TSV pair:
  ``export_run``, ``safe_name``, ``write_projector``.
- ``trackers``: a train run sent to TensorBoard and MLflow as it runs (``report_to``): ``Trackers``, ``mlflow_uri``,
  ``tensorboard_dir``.
"""
