"""A run in the experiment trackers researchers already compare runs in (TensorBoard, MLflow), beside the app.

A train run's `report_to` names the trackers. Its worker (core.jobs.worker.execute) opens them before the job
starts, streams the loss curve and the in-training evaluations as it records them, and, before it records how the
run ended, sends the evaluations before and after with their 95% intervals, its tags and its status. This is one
path for every way a run trains (one process, DDP's rank 0, a Ray sweep's driver), so the trainer's own
`report_to`, which runs inside the training process only, is left off. Nothing contacts a host unless the user
sets MLFLOW_TRACKING_URI; TensorBoard writes under <home>/tensorboard/<run label>-<run id>, MLflow by default to a
SQLite file in the home. Every headline figure goes in the unit the pages show it (UNITS_TEXT).
"""

from __future__ import annotations

import math
import os
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

from core.data.content import given_file_name
from core.errors import UserError
from core.evaluation.headline import HEADLINE
from core.evaluation.uncertainty import figure_interval
from core.runs.export import original_names, safe_name
from core.runs.labels import own_settings_text, run_label
from core.runs.store import Run
from core.storage import home
from core.training.config import portable

MLFLOW_URI_ENV = "MLFLOW_TRACKING_URI"
# MLflow's HTTP requests bounded: its defaults (120 s a request, 7 retries backing off by a factor of 2) kept a run
# silent for minutes before a server that accepts and never answers, or an unreachable one, failed it. With these a
# request gives up within about 20 s; a user's own MLFLOW_HTTP_REQUEST_* settings win.
MLFLOW_HTTP = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "5", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
               "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
IN_MEMORY = ("sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite://:memory:")  # stores nothing outlives
STATUS = {"done": "FINISHED", "failed": "FAILED", "cancelled": "KILLED"}  # MLflow's words for how a run ended
PARAM_CHARS = 6000  # MLflow's longest parameter value


def targets(report_to: str | None) -> list[str]:
    """The trackers a report_to setting names (none: [])."""
    return [] if not report_to or report_to == "none" else report_to.split(",")


def run_name(run: Run) -> str:
    """The run as the trackers name it: its label as the Runs page shows it, without a status ('triplet · margin 0.1
    · <id>')."""
    return run_label(run, own_settings_text(run)).removesuffix(f" · {run.status}")


def tensorboard_dir(run: Run) -> Path:
    """<home>/tensorboard/<the run's label>-<run id>: TensorBoard names a run by its folder, so its list of runs reads
    as the app's ("triplet_margin_0.1-<id>"), not as ids alone."""
    return home() / "tensorboard" / f"{safe_name(run_name(run).removesuffix(f' · {run.id}'), 60)}-{run.id}"


def mlflow_uri() -> str:
    """The lab's MLflow server (MLFLOW_TRACKING_URI) when set, else a SQLite file in the home."""
    return os.environ.get(MLFLOW_URI_ENV) or f"sqlite:///{(home() / 'mlflow.db').resolve()}"


def checked_mlflow_uri() -> str:
    """mlflow_uri(), refusing an in-memory SQLite store: a run reported to it ended done with nothing kept."""
    uri = mlflow_uri()
    if uri.strip().lower() in IN_MEMORY:
        raise UserError(f"{MLFLOW_URI_ENV}={uri} is an in-memory store, so nothing the run reports to it would be "
                        "kept; name a file (sqlite:///path/to/mlflow.db), a server, or unset it for "
                        "<home>/mlflow.db.")
    return uri


def mlflow_client():
    """An MlflowClient of checked_mlflow_uri(); a SQLite store is created (and migrated) under a file lock beside it:
    two first runs at once both migrated a new database, and one failed ("duplicate column name: step")."""
    import fcntl

    from mlflow.tracking import MlflowClient

    for name, value in MLFLOW_HTTP.items():
        os.environ.setdefault(name, value)
    uri = checked_mlflow_uri()
    if not uri.lower().startswith("sqlite:///"):
        return MlflowClient(tracking_uri=uri)
    lock = Path(uri.split(":///", 1)[1] + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # the store is created now, while the lock is held
    return client


def run_params(run: Run) -> dict[str, str]:
    """Every setting of the run's config, the corpus by the name the user gave it and its content (as its export's
    config names it), flattened to 'corpus.name', 'corpus.content', ... and written as text."""
    def flat(prefix: str, value: object) -> Iterable[tuple[str, str]]:
        if isinstance(value, dict):
            for key, inner in value.items():
                yield from flat(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            yield prefix, str(value)[:PARAM_CHARS]

    return dict(flat("", portable(run.config, original_names(run))))


SHOWN = {m.key: m for m in HEADLINE}
# Every headline figure goes to the trackers in the unit the pages show it (accuracies as % like P@k and S@k; they
# were logged as fractions beside P@k x 100), and each run says so in its own words.
UNITS_TEXT = ("Figures in the unit the pages show them: P@k, S@k, kNN, linear-probe and ordering accuracy in % "
              "(0-100), STS Spearman x 100 (-100-100), Kendall tau as is (-1-1); _ci_low and _ci_high are the bounds "
              "of their 95% interval.")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _figures(result: dict | None, prefix: str) -> dict[str, float]:
    """The headline figures of an evaluation result and their 95% interval bounds, as tracker metrics in the shown
    unit ('after_sts_spearman', 'after_sts_spearman_ci_low', ...); figures a run does not report are left out."""
    out: dict[str, float] = {}
    for metric in HEADLINE:
        value = (result or {}).get(metric.key)
        if _number(value):
            out[f"{prefix}_{metric.key}"] = metric.shown(float(value))
            interval = figure_interval(result, metric.key)
            if interval is not None:
                out[f"{prefix}_{metric.key}_ci_low"], out[f"{prefix}_{metric.key}_ci_high"] = (
                    metric.shown(bound) for bound in interval)
    return out


def _numbers(point: dict) -> dict[str, float]:
    """An in-training evaluation's figures, each headline figure in its shown unit."""
    return {key: SHOWN[key].shown(float(value)) if key in SHOWN else float(value) for key, value in point.items()
            if key != "step" and _number(value)}


class TensorBoard:
    """Scalars under <home>/tensorboard/<run id>: train/loss, eval/<figure> over steps, before/ and after/ figures
    with their interval bounds; the settings and tags as text."""

    def __init__(self, run: Run, params: dict[str, str]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(tensorboard_dir(run)))
        table = "\n".join(f"| {key} | {value} |" for key, value in params.items())
        self.writer.add_text("contrastlab/run", run_name(run))
        self.writer.add_text("contrastlab/settings", "| setting | value |\n|---|---|\n" + table)
        self.writer.add_text("contrastlab/units", UNITS_TEXT)

    def losses(self, points: list[tuple[int, float]]) -> None:
        for step, loss in points:
            self.writer.add_scalar("train/loss", loss, step)
        self.writer.flush()

    def evaluation(self, point: dict) -> None:
        for key, value in _numbers(point).items():
            self.writer.add_scalar(f"eval/{key}", value, int(point.get("step", 0)))
        self.writer.flush()

    def finish(self, run: Run, status: str, after: dict | None, step: int) -> None:
        for name, value in _figures(run.metrics_before, "before").items():
            self.writer.add_scalar(name.replace("_", "/", 1), value, 0)
        for name, value in _figures(after, "after").items():
            self.writer.add_scalar(name.replace("_", "/", 1), value, step)
        self.writer.add_text("contrastlab/status", status)
        if run.tags:
            self.writer.add_text("contrastlab/tags", ", ".join(run.tags))
        self.writer.close()


class MLflow:
    """One MLflow run per ContrastLab run: experiment = the corpus's name, run name = the run's label, tag
    contrastlab.run_id; params = the run's settings; metrics train_loss, eval_<figure>, before_/after_<figure>
    and their _ci_low / _ci_high."""

    def __init__(self, run: Run, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        self.client = mlflow_client()
        experiment = given_file_name(run.corpus_name, run.config.get("corpus") or "corpus")
        found = self.client.get_experiment_by_name(experiment)
        if found is not None:
            experiment_id = found.experiment_id
        elif os.environ.get(MLFLOW_URI_ENV):  # a lab's server keeps the artefacts where it is set up to
            experiment_id = self.client.create_experiment(experiment)
        else:
            experiment_id = self.client.create_experiment(
                experiment, artifact_location=(home() / "mlflow-artifacts").resolve().as_uri())
        self.run_id = self.client.create_run(experiment_id, run_name=run_name(run),
                                             tags={"contrastlab.run_id": run.id, "contrastlab.units": UNITS_TEXT,
                                                   "mlflow.note.content": UNITS_TEXT}).info.run_id
        listed = [Param(key, value) for key, value in params.items()]
        for start in range(0, len(listed), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=listed[start:start + 100])

    def _log(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in values.items()]
        for start in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + 1000])

    def losses(self, points: list[tuple[int, float]]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric("train_loss", loss, now, step) for step, loss in points
                                                    if math.isfinite(loss)])

    def evaluation(self, point: dict) -> None:
        self._log({f"eval_{key}": value for key, value in _numbers(point).items()}, int(point.get("step", 0)))

    def finish(self, run: Run, status: str, after: dict | None, step: int) -> None:
        self._log(_figures(run.metrics_before, "before"), 0)
        self._log(_figures(after, "after"), step)
        if run.tags:
            self.client.set_tag(self.run_id, "contrastlab.tags", ", ".join(run.tags))
        self.client.set_terminated(self.run_id, STATUS.get(status, "FAILED"))


class Trackers:
    """The trackers a run reports to. Opening one that cannot be reached fails the run before it trains (a one-line
    UserError); a tracker that fails later is written to the run's log and left out from then on, so a trained
    model is never lost to a tracker's hiccup."""

    def __init__(self, run: Run, log: Path) -> None:
        self.log = log
        self.open: dict[str, TensorBoard | MLflow] = {}
        self.last_step = 0
        self.held: dict | None = None  # the latest evaluation point, sent once another follows (evaluation)
        params = run_params(run)  # reads the corpus's content: once, for every tracker
        for name in targets(run.config.get("report_to")):
            try:
                self.open[name] = (TensorBoard if name == "tensorboard" else MLflow)(run, params)
            except Exception as exc:  # noqa: BLE001 - any failure to reach a tracker is the user's to fix
                where = mlflow_uri() if name == "mlflow" else tensorboard_dir(run)
                raise UserError(f"Could not report to {name} at {where} ({type(exc).__name__}: "
                                f"{' '.join(str(exc).split())[:300]}); fix it, or set report_to to none.") from exc

    def _each(self, call: str, *args: object) -> None:
        for name, tracker in list(self.open.items()):
            try:
                getattr(tracker, call)(*args)
            except Exception as exc:  # noqa: BLE001 - logged, and the run goes on without this tracker
                with open(self.log, "a", encoding="utf-8") as log:
                    log.write(f"warning: reporting to {name} failed, so the run stops reporting to it:\n")
                    traceback.print_exception(exc, file=log)
                del self.open[name]

    def losses(self, points: list[tuple[int, float]]) -> None:
        if points:
            self.last_step = max(self.last_step, max(step for step, _loss in points))
            self._each("losses", points)

    def evaluation(self, point: dict) -> None:
        """One point of the run's evaluation history, sent as eval_<figure>. The history's first point (step 0) is
        the evaluation before training and, on a run that ends done, its last the one after it: those go as
        before_ and after_ figures at the end, not twice, so each point is held until the next one comes."""
        self.last_step = max(self.last_step, int(point.get("step", 0)))
        if int(point.get("step", 0)) == 0:
            return
        if self.held is not None:
            self._each("evaluation", self.held)
        self.held = point

    def finish(self, run: Run, status: str, after: dict | None) -> None:
        if self.held is not None and after is None:  # no after-evaluation: the last point was one during training
            self._each("evaluation", self.held)
        self._each("finish", run, status, after, self.last_step)
