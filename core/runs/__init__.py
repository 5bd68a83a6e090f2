"""Runs: the record of every run and what can be taken away from it.

- ``store``: the SQLite run store and artefact folders: ``RunStore``, ``Run``, ``pid_alive``, ``TMP_NAME``.
- ``labels``: how a run is named everywhere: ``run_label``, ``knob_text``, ``knob_value``, ``run_reference``.
- ``export``: a finished run's model (zip, card), config and embeddings: ``export_run``, ``safe_name``.
"""
