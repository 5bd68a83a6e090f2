"""Jobs: runs executed in detached worker processes that outlive the page or terminal that started them.

- ``worker``: the worker process body and the job context a job reports through: ``execute``, ``JobContext``,
  ``JOBS``.
- ``process``: spawning a detached worker (or a distributed run's launcher): ``spawn``, ``worker_env``, ``LOG_NAME``.
- ``launch``: starting a queued run (on a standby when one waits; a run over several processes on its DDP
  launcher) and following it (a run whose worker died is failed): ``start``, ``poll``.
- ``ddp``: a run over several processes (PyTorch DDP through torchrun): the launcher, each rank's body, the
  rendezvous of several machines: ``start``, ``launch``, ``rendezvous``, ``Rendezvous``, ``describe_failure``,
  ``PeerLost``, ``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``.
- ``standby``: pre-warmed workers with the heavy imports done: ``ensure``, ``hand_over``, ``stop_all``.
- ``sweep``: a grid of (recipe, margin or scale) runs in one worker: ``sweep_config``, ``cancel``.
- ``ray_sweep``: a sweep's grid points as Ray tasks, recorded by the sweep's worker as their results arrive:
  ``run_on_ray``, ``ray_available``, ``check_address``.
- ``quick``: small-budget runs at one knob value, reused per value (the margin slider), training the top layers
  from cached frozen states: ``quick_run``, ``quick_config``, ``find_quick``, ``is_quick``, ``quick_text``,
  ``quick_top_layers``, ``QUICK_BUDGET``, ``QUICK_TOP``.
"""
