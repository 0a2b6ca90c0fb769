"""`hwprof compare`'s options, the performance gate's among them (hwprof.analysis.gate.verdict), and the library's
CompareRequest made of them (run by hwprof.api.comparing)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Protocol

from hwprof.api.requests import CompareRequest, gate_options


class OptionGroup(Protocol):
    """What add_argument_group returns, as far as these options use it (argparse's class for it is private)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


PERCENT_OPTIONS = ("--fail-above", "--gate-share", "--confidence", "--count-threshold", "--miss-threshold")
"""compare's options that take a percentage."""


def joined_negative_percents(words: list[str]) -> list[str]:
    """`--fail-above -5%` as `--fail-above=-5%`: argparse takes a word that starts with '-' and is not a plain
    number for an option, and would refuse the first as a missing value; joined, the value reaches the gate's own
    check, which says in one line what the option accepts."""
    out: list[str] = []
    for word in words:
        if out and out[-1] in PERCENT_OPTIONS and word[:2] in {f"-{d}" for d in "0123456789."}:
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def add_compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dirs", type=Path, nargs="+", metavar="RUN", help="run directories; the first is the baseline (BASE)"
    )
    p.add_argument("--top", type=int, default=15, help="layers shown in the layer tables, slowest first")
    p.add_argument(
        "--format",
        choices=("rich", "markdown", "json", "html"),
        default="rich",
        help="terminal tables (rich), markdown, JSON (with the gate's verdict under 'gate'), or one self-contained "
        "HTML page on standard output (> compare.html)",
    )
    g = p.add_argument_group("performance gate (two runs: BASE NEW; exit 1 when NEW is resolved slower)")
    g.add_argument(
        "--fail-above",
        metavar="PCT",
        help="gate NEW against BASE: exit 1 when the forward, the iteration, a gated layer or a callgrind count "
        "is slower than BASE by more than PCT (e.g. 5%%) and the difference is resolved",
    )
    g.add_argument(
        "--gate-share", metavar="PCT", default="2%", help="layers at or above this share of forward are gated on time"
    )
    g.add_argument(
        "--layer-stat",
        choices=("share", "ms"),
        default="share",
        help="judge a layer on its share of forward per iteration (default: free of a shift of the whole process "
        "between the two runs, which the forward answers for) or on its self ms",
    )
    g.add_argument(
        "--unresolved",
        choices=("pass", "fail"),
        default="pass",
        help="exit status when the runs' spreads cannot resolve a figure: pass (exit 0, the verdict says "
        "'not resolved') or fail (exit 1)",
    )
    g.add_argument(
        "--confidence", metavar="PCT", default="95%", help="confidence of the bootstrap interval of each timed ratio"
    )
    g.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per timed figure")
    g.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (the verdict is reproducible)")
    _add_count_and_output_args(g)


def _add_count_and_output_args(g: OptionGroup) -> None:
    """The gate's callgrind, paired and output options."""
    g.add_argument(
        "--count-threshold",
        metavar="PCT",
        default="0.5%",
        help="callgrind runs: a layer's or the forward's simulated count that grew by more than PCT fails",
    )
    g.add_argument(
        "--miss-threshold",
        metavar="PCT",
        help="callgrind runs: also gate the simulated LLC and L1D load misses, failing a count that grew by more "
        "than PCT (not gated by default: they move with the memory layout)",
    )
    g.add_argument(
        "--gate-on",
        choices=("both", "time", "counts"),
        default="both",
        help="which figures to gate: timed ones, callgrind's exact counts (free of the machine's noise), or both",
    )
    g.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="BLOCKS",
        help="measure BASE's and NEW's configurations again, interleaved in BLOCKS ABBA blocks in one process, and "
        "gate the forward and iteration on the blocks' ratios (robust to a machine that shifts between processes)",
    )
    g.add_argument(
        "--gate-different",
        action="store_true",
        help="gate runs of different models, image sizes, batches, runtimes or precisions (refused otherwise)",
    )
    g.add_argument("--gate-report", type=Path, metavar="FILE.md", help="write the verdict as markdown (job summary)")
    g.add_argument("--junit", type=Path, metavar="FILE.xml", help="write JUnit XML: one test case per gated figure")
    g.add_argument("--gate-json", type=Path, metavar="FILE.json", help="write the verdict and every figure as JSON")


def compare_request(args: argparse.Namespace) -> CompareRequest:
    """compare's options as the library's request (the gate's, checked by gate_options, with --fail-above)."""
    gate = None
    if args.fail_above is not None:
        gate = gate_options(
            args.fail_above,
            share=args.gate_share,
            confidence=args.confidence,
            resamples=args.resamples,
            seed=args.seed,
            unresolved=args.unresolved,
            count_threshold=args.count_threshold,
            miss_threshold=args.miss_threshold,
            gate_on=args.gate_on,
            layer_stat=args.layer_stat,
            gate_different=args.gate_different,
            paired=args.paired,
        )
    return CompareRequest(
        tuple(args.run_dirs),
        top=args.top,
        format=args.format,
        gate=gate,
        paired=args.paired,
        gate_report=args.gate_report,
        junit=args.junit,
        gate_json=args.gate_json,
    )
