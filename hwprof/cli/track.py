"""`--track [URI]` (collect, sweep, advise) and `hwprof track RUN...`: runs logged to MLflow (hwprof.api.tracking).

MLflow is checked up front, before a collect starts: a missing extra is refused in one line (exit 2), never found
out after an hour of passes. A store that fails afterwards leaves the runs as they are: its one line says how to log
them later, and the exit status is EXIT_NOT_TRACKED where the command itself succeeded.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlparse

from rich.console import Console
from rich.markup import escape

from hwprof.cli.exit_codes import EXIT_NOT_TRACKED
from hwprof.cli.gate_args import OptionGroup
from hwprof.core.secrets import masked


def add_track_option(p: OptionGroup | argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--track",
        nargs="?",
        const="",
        default=None,
        metavar="URI",
        help=f"log {what} to MLflow: URI, else $MLFLOW_TRACKING_URI, else results/mlflow.db (needs hwprof[track])",
    )


def add_track_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN", help="run directories of `hwprof collect`")
    p.add_argument("--uri", help="the tracking store (default: $MLFLOW_TRACKING_URI, else RESULTS/mlflow.db)")
    p.add_argument("--results", type=Path, default=Path("results"), help="where the embedded store's file goes")
    p.add_argument("--trace", action="store_true", help="log trace.pftrace too (large)")


SCHEMES = frozenset({"", "file", "http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "uc"})
"""The tracking URIs' schemes MLflow's client takes (a `postgresql+psycopg2://` counts as postgresql)."""


def check_tracking(args: argparse.Namespace) -> None:
    """--track (or track's --uri) that can never work: ValueError (one line) before anything runs."""
    uri = getattr(args, "track", None) if args.command != "track" else (args.uri or "")
    if uri is None:
        return
    if importlib.util.find_spec("mlflow") is None:
        from hwprof.tracking.mlflow_store import INSTALL

        what = "hwprof track" if args.command == "track" else "--track"
        raise ValueError(f"{what} needs MLflow, which is not installed: {INSTALL}")
    scheme = urlparse(uri).scheme.split("+")[0].lower()
    if scheme not in SCHEMES and not re.fullmatch(r"[a-z]", scheme):  # C:\... is a path
        raise ValueError(
            f"{masked(uri)!r} is no tracking URI MLflow takes: http(s)://HOST:PORT, sqlite:///FILE, "
            "postgresql://, mysql://, databricks"
        )
    folder = uri != "" and (scheme == "file" or scheme == "" or re.fullmatch(r"[a-z]", scheme) is not None)
    if folder and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() not in ("true", "1"):
        from hwprof.tracking.mlflow_store import FILE_STORE_FIX

        raise ValueError(f"{masked(uri)!r}: {FILE_STORE_FIX}")


def cmd_track(args: argparse.Namespace, console: Console) -> int:
    from hwprof.api.tracking import track_runs

    for run_dir in args.run_dirs:
        if not (run_dir / "run.json").is_file():
            raise ValueError(f"{run_dir} is not a run directory (no run.json)")
    return tracked(console, 0, lambda: track_runs(args.run_dirs, args.uri, args.results, say_to(console), args.trace))


def track_after(console: Console, code: int, run_dirs: Sequence[Path], uri: str, results: Path) -> int:
    """The runs a command made, logged once it is done; `code`: its exit status so far."""
    from hwprof.api.tracking import track_runs

    return tracked(console, code, lambda: track_runs(run_dirs, uri or None, results, say_to(console)))


def tracked(console: Console, code: int, log: Callable[[], object]) -> int:
    from hwprof.tracking.mlflow_store import TrackingError  # not on every command's start: it reads the analysis

    try:
        log()
    except TrackingError as exc:
        console.print(f"[red]hwprof: not tracked:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return code or EXIT_NOT_TRACKED
    return code


def say_to(console: Console) -> Callable[[str], None]:
    """Tracking's lines as the console prints them (plain text: URIs and paths hold brackets)."""
    return lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True)
