"""`hwprof advise RUN`'s options, and the command: an AdviseRequest run by the library (hwprof.api.advising)."""

from __future__ import annotations

import argparse

from rich.console import Console

from hwprof.api.requests import AdviseRequest, csv_list
from hwprof.cli.gate_args import OptionGroup
from hwprof.core.config import ADVISE_BLOCKS
from hwprof.session.stopping import StopSignals


def cmd_advise(args: argparse.Namespace, console: Console) -> int:
    from hwprof.api.advising import advise_and_render

    stop: StopSignals = args.stop
    advise_and_render(args.run_dir, advise_request(args), console, stop)
    if stop.requested:
        return stop.exit_code
    if getattr(args, "track", None) is None:
        return 0
    from hwprof.cli.track import track_after

    return track_after(console, 0, [args.run_dir], args.track, args.run_dir.resolve().parent)


def advise_request(args: argparse.Namespace) -> AdviseRequest:
    """advise's options (collect's --advise-*) as the library's request."""
    only = tuple(csv_list(getattr(args, "advise_only", "") or ""))
    return AdviseRequest(blocks=args.blocks, layers=not args.no_layers, only=only)


def add_advise_args(p: OptionGroup, prefix: str = "") -> None:
    """advise's options; collect's --advise-* (prefix "advise-") in its advice group, with the same dests."""
    p.add_argument(
        f"--{prefix}blocks",
        dest="blocks",
        type=int,
        default=ADVISE_BLOCKS,
        help="ABBA blocks per candidate (4 iterations each)",
    )
    p.add_argument(
        f"--{prefix}no-layers",
        dest="no_layers",
        action="store_true",
        help="skip the layers collect of each variant (no per-layer deltas)",
    )
    p.add_argument(
        f"--{prefix}only",
        dest="advise_only",
        default="",
        metavar="KEYS",
        help="run only these candidates (comma list of keys, e.g. malloc-keep,jemalloc), each even where no "
        "finding of the run points to it; advice.json then holds only their rows",
    )
