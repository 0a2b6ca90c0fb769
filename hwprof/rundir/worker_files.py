"""The files the session and a pass's worker hand each other: config.json (the run's options) and images.json
(the images every pass reads), and in the pass folder command.json (the command line the worker ran with) and
worker.pid (its pid, when a launcher runs it). The worker's own results are in pass_files.py."""

from __future__ import annotations

import json
from pathlib import Path

from hwprof.core.atomic import atomic_write_text
from hwprof.core.config import RunConfig
from hwprof.rundir.names import COMMAND_JSON, CONFIG_JSON, IMAGES_JSON, WORKER_PID
from hwprof.schema.check import RunDirError, found, read_json_object
from hwprof.schema.codec import JsonObject


def write_config(run_dir: Path, config: RunConfig) -> None:
    """config.json: the run's options (RunConfig.to_dict), which every pass's worker reads."""
    atomic_write_text(run_dir / CONFIG_JSON, json.dumps(config.to_dict(), indent=2))


def read_config(run_dir: Path) -> RunConfig:
    """The run's options from config.json; RunDirError (one line) when it is missing or not a JSON object."""
    return RunConfig.from_dict(read_json_object(run_dir / CONFIG_JSON))


def write_images(run_dir: Path, images: JsonObject) -> None:
    """images.json: the image paths, the files skipped (with the reason) and their source."""
    atomic_write_text(run_dir / IMAGES_JSON, json.dumps(images, indent=1))


def read_image_paths(run_dir: Path) -> list[Path]:
    """images.json's paths; RunDirError (one line naming the file and the field) when damaged."""
    path = run_dir / IMAGES_JSON
    paths = read_json_object(path).get("paths")
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise RunDirError(f'{path}: field "paths" must be a list of strings, found {found(paths)}')
    return [Path(p) for p in paths]


def write_command(pass_dir: Path, command: list[str]) -> None:
    atomic_write_text(pass_dir / COMMAND_JSON, json.dumps(command))


def write_worker_pid(pass_dir: Path, pid: int) -> None:
    atomic_write_text(pass_dir / WORKER_PID, str(pid))


def read_worker_pid(pass_dir: Path) -> int | None:
    """The pid the worker wrote into its pass folder; None when it has not (yet) written a whole one."""
    try:
        return int((pass_dir / WORKER_PID).read_text())
    except (OSError, ValueError):
        return None
