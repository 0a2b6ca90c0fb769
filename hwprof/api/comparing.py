"""`hwprof compare` run from its CompareRequest (hwprof.api.requests), whichever door made it: the command line
(hwprof.cli.gate_args) prints the comparison and the gate's verdict; the library's hwprof.gate takes the same
verdict (gate_verdict) and prints nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.api.requests import CompareRequest

if TYPE_CHECKING:
    from rich.console import Console

    from hwprof.analysis.gate.verdict import GateOptions, Verdict
    from hwprof.session.stopping import StopSignals


def run_compare(request: CompareRequest, console: Console, stop: StopSignals) -> int:
    """Print the runs side by side; with a gate, its verdict too (and write its files). The exit status: 0, or
    the gate's (1 when NEW is resolved slower, or not resolved with --unresolved fail)."""
    from hwprof.render.compare.views import compare
    from hwprof.render.gate import compare_gate, show_verdict

    if request.gate is None:
        compare(request.runs, console=console, top=request.top, format=request.format)
        return 0
    if request.paired:  # no comparison tables: the runs as recorded are not what was judged
        verdict = gate_verdict(request, stop)
        show_verdict(verdict, request.gate, request.outputs, console, request.format)
        return verdict.exit_code
    outputs = request.outputs
    return compare_gate(request.runs, request.gate, outputs, console, request.top, request.format).exit_code


def gate_verdict(request: CompareRequest, stop: StopSignals) -> Verdict:
    """The gate's verdict, printed nowhere: NEW judged against BASE as recorded, or (--paired) on the blocks of
    their configurations measured again. GateError (one line) where the gate cannot be meaningful."""
    from hwprof.api.gate_paired import measure_paired
    from hwprof.render.gate import gate_runs

    gate = _gate_of(request)
    if not request.paired:
        return gate_runs(request.runs, gate)[0]
    verdict, wall_s = measure_paired(list(request.runs), request.paired, gate, stop)
    verdict.notes.append(f"the paired measure took {wall_s:.0f} s")
    return verdict


def gate_and_write(request: CompareRequest, stop: StopSignals) -> Verdict:
    """gate_verdict, and the gate's files the request asks for (hwprof.gate)."""
    from hwprof.render.gate import write_gate_files

    verdict = gate_verdict(request, stop)
    write_gate_files(verdict, request.outputs, _gate_of(request).fail_above)
    return verdict


def _gate_of(request: CompareRequest) -> GateOptions:
    if request.gate is None:
        raise ValueError("the gate needs --fail-above PCT (its threshold)")
    return request.gate
