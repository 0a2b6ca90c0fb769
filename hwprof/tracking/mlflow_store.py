"""Runs logged to MLflow through its own client (`mlflow.MlflowClient`): the optional extra `hwprof[track]`.

Where: an explicit URI (`--track URI`), else $MLFLOW_TRACKING_URI, else the embedded default, an SQLite file in the
results folder (`sqlite:///results/mlflow.db`, MLflow's own default backend since 3.7: no server), whose
artifacts go beside it (results/mlartifacts). Every run is one MLflow run of the experiment "hwprof", found again by
its `hwprof.run_id` tag: a run logged twice is one MLflow run (the second time logs nothing new and says so). A
sweep is a parent run with a child per point; an advise is the baseline's child runs, one per candidate.

A store that refuses, times out or is not MLflow never costs the run: TrackingError's one line says the run is kept
where it is and the command that logs it later. HTTP requests are limited (MLFLOW_HTTP_REQUEST_MAX_RETRIES and
_TIMEOUT, unless set): MLflow's own defaults retry for minutes before giving up.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.secrets import masked
from hwprof.tracking.run_figures import RUN_ID_TAG, RunFigures

if TYPE_CHECKING:
    from mlflow import MlflowClient

EXPERIMENT = "hwprof"
DEFAULT_DB = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "15"}
ENDS = {"failed": "FAILED", "partial": "FAILED", "interrupted": "KILLED"}
"""A run's status -> its MLflow run's end (anything else, complete or an advise row's, is FINISHED)."""
INSTALL = "pip install -c constraints.txt '.[track]' in hwprof's checkout (mlflow 3.17.2)"


class TrackingError(RuntimeError):
    """The run could not be logged: one line, with the run's folder and how to log it later."""


@dataclass(frozen=True)
class Logged:
    """A run as MLflow has it."""

    mlflow_run_id: str
    uri: str
    """The store's URI with its password masked."""
    experiment_id: str
    new: bool
    """False: it was logged before (found by its hwprof.run_id tag); nothing was logged again."""
    seconds: float = 0.0


def tracking_uri(explicit: str | None, results: Path) -> str:
    """The store's URI: the one given, else $MLFLOW_TRACKING_URI, else the embedded SQLite file in `results`."""
    if explicit:
        return explicit
    env = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if env:
        return env
    return f"sqlite:///{(results / DEFAULT_DB).resolve()}"


def ui_command(uri: str) -> str:
    """The command that opens MLflow's UI on this store."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser"
    return f"mlflow ui --backend-store-uri {uri}"


class Store:
    """One tracking store, opened once for all the runs a command logs."""

    def __init__(self, uri: str, later: str) -> None:
        """`later`: the command that logs the runs later, said when this store fails."""
        self.uri = uri
        self.shown = masked(uri)
        """The URI as said and kept: its password masked (hwprof.core.secrets)."""
        self.later = masked(later)
        try:
            from mlflow import MlflowClient
        except ImportError:
            raise TrackingError(f"MLflow is not installed: {INSTALL}; {later}") from None
        for name, value in HTTP_LIMITS.items():
            os.environ.setdefault(name, value)
        for logger in ("mlflow", "alembic"):  # the embedded store's "Creating initial MLflow database tables..."
            logging.getLogger(logger).setLevel(logging.WARNING)
        refusal = sqlite_refusal(uri)
        if refusal is not None:
            raise TrackingError(f"MLflow at {self.shown} cannot be used: {refusal}; {self.later}")
        try:
            self.client: MlflowClient = MlflowClient(tracking_uri=uri)
        except Exception as exc:
            raise self._fail("cannot be used", exc) from exc
        self._experiment: str | None = None

    def _fail(self, what: str, exc: BaseException) -> TrackingError:
        return TrackingError(masked(f"MLflow at {self.shown} {what}: {failure_cause(exc)}; {self.later}"))

    @property
    def experiment_id(self) -> str:
        if self._experiment is None:
            try:
                found = self.client.get_experiment_by_name(EXPERIMENT)
                if found is not None:
                    self._experiment = str(found.experiment_id)
                else:
                    self._experiment = str(
                        self.client.create_experiment(EXPERIMENT, artifact_location=self._artifacts())
                    )
            except Exception as exc:  # MLflow raises its own, requests', SQLAlchemy's ... for a store it cannot use
                raise self._fail("could not open the experiment", exc) from exc
        return self._experiment

    def _artifacts(self) -> str | None:
        """The embedded store's artifacts beside its file; a server's are its own (None)."""
        if self.uri.startswith("sqlite:///"):
            return (Path(self.uri.removeprefix("sqlite:///")).parent / ARTIFACTS_DIR).resolve().as_uri()
        return None

    def find(self, run_id: str) -> str | None:
        """The MLflow run logged for hwprof's `run_id`, or None."""
        try:
            runs = self.client.search_runs([self.experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'")
        except TrackingError:
            raise
        except Exception as exc:
            raise self._fail("could not be searched", exc) from exc
        return str(runs[0].info.run_id) if runs else None

    def log(self, figures: RunFigures, parent: str | None = None) -> Logged:
        """`figures` as one MLflow run (a child of `parent`), unless the run was logged before."""
        start = time.perf_counter()
        found = self.find(figures.run_id)
        if found is not None:
            return Logged(found, self.shown, self.experiment_id, new=False, seconds=time.perf_counter() - start)
        tags = dict(figures.tags)
        if parent is not None:
            tags["mlflow.parentRunId"] = parent
        try:
            run = self.client.create_run(self.experiment_id, tags=tags, run_name=figures.name)
            run_id = str(run.info.run_id)
            self._batch(run_id, figures)
            for path in figures.artifacts:
                self.client.log_artifact(run_id, str(path))
            for name, text in figures.texts.items():
                self.client.log_text(run_id, text, name)
            self._terminate(run_id, ENDS.get(tags.get("status", ""), "FINISHED"))
        except Exception as exc:
            raise self._fail("refused the run", exc) from exc
        return Logged(run_id, self.shown, self.experiment_id, new=True, seconds=time.perf_counter() - start)

    def _batch(self, run_id: str, figures: RunFigures) -> None:
        from mlflow.entities import Metric, Param

        now = int(time.time() * 1000)
        params = [Param(k, v) for k, v in figures.params.items()]
        metrics = [Metric(k, v, now, 0) for k, v in figures.metrics.items()]
        for chunk in _chunks(params, 100):  # MLflow's limits per batch: 100 params, 1000 metrics
            self.client.log_batch(run_id, params=chunk)
        for chunk_m in _chunks(metrics, 1000):
            self.client.log_batch(run_id, metrics=chunk_m)

    def parent(self, key: str, name: str, params: dict[str, str], tags: dict[str, str]) -> str:
        """The parent run of a sweep (found again by `key`, its hwprof.run_id tag, or created)."""
        found = self.find(key)
        if found is not None:
            return found
        try:
            run = self.client.create_run(self.experiment_id, tags={RUN_ID_TAG: key, **tags}, run_name=name)
            self._batch(str(run.info.run_id), RunFigures(run_id=key, name=name, params=params))
            return str(run.info.run_id)
        except Exception as exc:
            raise self._fail("refused the run", exc) from exc

    def finish(self, run_id: str, status: str = "FINISHED") -> None:
        try:
            self._terminate(run_id, status)
        except Exception as exc:
            raise self._fail("refused the run's end", exc) from exc

    def _terminate(self, run_id: str, status: str) -> None:
        """The run ended in MLflow. MLflow writes its "View run ... at: URL" lines to sys.stdout itself, with the
        URI's password: they are said again masked."""
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said):
                self.client.set_terminated(run_id, status)
        finally:
            sys.stdout.write(masked(said.getvalue()))


def sqlite_refusal(uri: str) -> str | None:
    """Why an SQLite store's file cannot be written, found before MLflow tries: MLflow retries an engine it cannot
    create for about 100 s, printing 36 warnings (a store in a read-only folder); None when it can be (or the store
    is no SQLite file)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri.removeprefix("sqlite:///"))
    try:  # the store's folder made where missing (results/ before a first collect into it), as a collect makes it
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"its folder {path.parent} cannot be made ({exc.strerror or exc}); fix: give a folder you can write"
    try:
        if path.exists():
            path.open("r+b").close()
        else:
            tempfile.TemporaryFile(dir=path.parent).close()
    except OSError as exc:
        where = path if path.exists() else path.parent
        return f"{where} cannot be written ({exc.strerror or exc}); fix: give an SQLite file in a folder you can write"
    return None


FILE_STORE_REFUSED = "filesystem tracking backend"
"""What MLflow (3.7 and later) says when it refuses a folder as a store (its file store is in maintenance mode)."""
FILE_STORE_FIX = (
    "MLflow no longer takes a folder as a store; fix: sqlite:///FOLDER/mlflow.db, or MLFLOW_ALLOW_FILE_STORE=true to "
    "keep the folder"
)


def failure_cause(exc: BaseException) -> str:
    """What went wrong with the store, in a few words: MLflow wraps the cause in long messages."""
    text = str(exc)
    if FILE_STORE_REFUSED in text:
        return FILE_STORE_FIX
    if "NewConnectionError" in text or "Connection refused" in text:
        return "nothing answers there (connection refused)"
    if "ReadTimeout" in text or "timed out" in text:
        return f"no answer within {os.environ.get('MLFLOW_HTTP_REQUEST_TIMEOUT', '?')} s (timed out)"
    code = re.search(r"error code (\d{3})", text)
    if code is not None:
        return f"answered HTTP {code.group(1)}: not an MLflow tracking server at that address"
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    return f"{type(exc).__name__}: {first[:200]}"


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
