"""Scalene's command line as a module whose `main(args)` a pass's worker forked from the collect's zygote can run
(hwprof.session.zygote): `python -P -m hwprof.collectors.scalene.forked_cli run ...` is `python -P -m scalene run ...`.

Why: started as a new interpreter, the Scalene pass spent 3.7-5.4 s importing Scalene, torch (which Scalene imports
itself), ultralytics and hwprof's runners before its worker built the model (yolov7-tiny at 320 and yolov7 at 640
on the 2-vCPU Xeon, 2026-11-28), where every other pass starts from the zygote with them imported. Scalene's CPU
mode runs the worker module in its own process (runpy), so that a fork serves it as well; its memory mode
re-executes Python with its allocator preloaded, and keeps the usual command (ScaleneCollector.wrap_command).

Scalene is imported when the launcher runs, never when the zygote imports this module: its import registers an
exit handler that every forked worker would otherwise inherit."""

from __future__ import annotations

import sys

MODULE = "hwprof.collectors.scalene.forked_cli"


def main(args: list[str] | None = None) -> int:
    """Scalene's own main on `args` (its command line after `-m scalene`); its exit status."""
    from scalene.__main__ import main as scalene_main

    sys.argv = ["scalene", *(sys.argv[1:] if args is None else args)]
    try:
        _preload_environ()
        scalene_main()
    except SystemExit as exc:
        if isinstance(exc.code, str):  # sys.exit("message"): said as the interpreter says it
            print(exc.code, file=sys.stderr)
            return 1
        return exc.code if isinstance(exc.code, int) else 0
    return 0


def _preload_environ() -> None:
    """The environment Scalene's CPU mode asks its process to have (ScalenePreload.get_preload_environ: its
    allocation sampling window, on Linux nothing preloaded), set here as Scalene itself would. Why: where any of it
    is missing, Scalene starts itself again as a new interpreter with it (ScalenePreload.setup_preload), which
    imported torch and hwprof's runners anew under Scalene's profiling: 3.6 s of the pass's 5.0 s start at
    yolov8n 64 on the 2-vCPU Xeon. Its memory mode preloads its allocator and never runs here."""
    import os

    from scalene.scalene_parseargs import ScaleneParseArgs
    from scalene.scalene_preload import ScalenePreload

    parsed, _ = ScaleneParseArgs.parse_args()
    if not getattr(parsed, "memory", False):
        os.environ.update(ScalenePreload.get_preload_environ(parsed))


if __name__ == "__main__":
    sys.exit(main())
