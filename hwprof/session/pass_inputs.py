"""What a pass's worker is given besides its run directory: the images record (images.json, and run.json's
images), its environment, and the collect's zygote that its worker may be forked from."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hwprof.session.child import CHILD_ENV

if TYPE_CHECKING:
    from hwprof.collectors.base import Collector, PassContext
    from hwprof.core.config import RunConfig
    from hwprof.schema.codec import JsonObject
    from hwprof.session.zygote import Zygote
    from hwprof.workload.images import ImageSet


def images_doc(images: ImageSet) -> JsonObject:
    """images.json, and run.json's images: the paths, the files skipped and their source (and the video)."""
    doc: JsonObject = {"paths": [str(p) for p in images.paths], "skipped": images.skipped, "source": images.source}
    if images.video is not None:
        doc["video"] = images.video.to_json()
    return doc


def pass_env(config: RunConfig, collectors: list[Collector], ctx: PassContext, extra: dict[str, str]) -> dict[str, str]:
    """The worker's environment: this one, the run's thread count for OpenMP and MKL, what every child of hwprof
    gets (CHILD_ENV), what the pass's collectors ask for, and `extra` (hwprof.session.program_passes)."""
    env = worker_env(config)
    for collector in collectors:
        env.update(collector.child_env(ctx))
    env.update(extra)
    return env


def worker_env(config: RunConfig) -> dict[str, str]:
    """A worker's environment before its collectors' variables and `extra`: the collect's zygote starts with it."""
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(config.threads), "MKL_NUM_THREADS": str(config.threads), **CHILD_ENV})
    return env


def start_zygote(config: RunConfig) -> Zygote | None:
    """The collect's zygote (none for a program's): the pass worker and the launchers that wrap it for the
    collectors the run asks for, with what they import on first use."""
    from hwprof.session.registry import all_collectors
    from hwprof.session.zygote import PASS_WORKER, Zygote

    if config.program is not None:
        return None
    asked = [c for c in all_collectors() if c.wanted(config)]
    modules = (PASS_WORKER, *sorted({module for c in asked for module in c.zygote_modules}))
    return Zygote.start(worker_env(config), modules, tuple(sorted({name for c in asked for name in c.zygote_imports})))
