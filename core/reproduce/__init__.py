"""Reproductions: each seed paper's headline experiment, one command away (`python -m core reproduce NAME --data
DIR`, the Reproductions page). A new experiment is one module plus one line in EXPERIMENTS.

- ``experiment``: what a reproduction is (Experiment, Arm, Outcome, Row, Setup) and how a row reads a figure and
  its 95% interval from an evaluation;
- one module per experiment, declaring its arms (training runs) and its rows (claim, published figure, ours, what
  differs from the paper): ``margins`` (seed 000), ``raoe`` (001), ``crops`` (002), ``listmle`` (003), ``mgh`` and
  ``ata`` (004);
- ``generated``: with --generator, the paper's training data written by a language model before the arms run, and
  every arm pointed at it (``check_generator``, ``generate_for``);
- ``validation``: arms chosen among on held-out training rows, never on test (mgh's best fixed band): ``views``,
  ``hold_out``, ``score_candidates``, ``best``;
- ``job``: a reproduction as a run of the store whose arms are its child runs (``reproduction_config``,
  ``run_job``, ``latest``);
- ``report``: the CLI's help and text table.
"""

from __future__ import annotations

from core.errors import UserError
from core.reproduce import ata, crops, listmle, margins, mgh, raoe
from core.reproduce.experiment import Experiment

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    margins.EXPERIMENT, raoe.EXPERIMENT, crops.EXPERIMENT, listmle.EXPERIMENT, mgh.EXPERIMENT, ata.EXPERIMENT)}


def get_experiment(name: str) -> Experiment:
    """The experiment called `name`; UserError listing the names otherwise."""
    found = EXPERIMENTS.get(name.strip() if isinstance(name, str) else name)
    if found is None:
        raise UserError(f"Unknown reproduction {str(name)!r}; choose one of: {', '.join(EXPERIMENTS)}.")
    return found
