"""Jobs: runs executed in detached worker processes that outlive the page or terminal that started them.

- ``worker``: the worker process body and the job context a job reports through: ``execute``, ``JobContext``,
  ``JOBS``.
- ``process``: spawning a detached worker: ``spawn``, ``LOG_NAME``.
- ``launch``: starting a queued run (on a standby when one waits) and following it (a run whose worker died is
  failed): ``start``, ``poll``.
- ``standby``: pre-warmed workers with the heavy imports done: ``ensure``, ``hand_over``, ``stop_all``.
- ``sweep``: a grid of (recipe, margin or scale) runs in one worker: ``sweep_config``, ``cancel``.
- ``quick``: small-budget runs at one knob value, reused per value (the margin slider), training the top layers
  from cached frozen states: ``quick_run``, ``quick_config``, ``find_quick``, ``is_quick``, ``quick_text``,
  ``quick_top_layers``, ``QUICK_BUDGET``, ``QUICK_TOP``.
"""
