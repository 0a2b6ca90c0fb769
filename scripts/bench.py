"""The benchmarks a maintainer reruns, behind one entry point: `python scripts/bench.py` lists them, one line each;
`python scripts/bench.py NAME [ARGS...]` runs scripts/NAME.py with ARGS (`NAME --help`: its own options).

The scripts stay files of their own under their names: the README, docs/*.md and hwprof's docstrings cite them
as `python scripts/NAME.py ...` next to the figures they printed, and those commands keep working. This runner
is the index: what each one measures is in docs/benchmarks.md, with its command and the figure it prints. The
tests marked `benchmark` (`pytest -m benchmark -s`, `tox -e bench`) are the other benchmarks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS: dict[str, str] = {
    "bench_counters_overhead": "the layers pass's cost over the timing pass, and the cost of one counter read",
    "bench_layers_pass_parts": "the layers pass's paired cost, one part (hooks, bus, perf reads, sampler) at a time",
    "bench_attributing_passes": "the layers and trace passes' paired costs as the report states them, per method",
    "bench_sampler_overhead": "the sysstat (and RAPL) samplers' cost on the forward, paired and as passes",
    "bench_kernels_overhead": "the kernels pass (layer markers + perf sampling) over the clean timing pass",
    "bench_trace_overhead": "the trace and Scalene passes' cost over the timing pass, and their clock alignment",
    "bench_profiler_options": "torch.profiler's own cost, each of its options switched off alone",
    "bench_trace_build": "trace.pftrace's size against Kineto's JSON, its build time and its load time",
    "bench_runtimes": "each runtime and precision's forward, layer by layer against torch fp32",
    "bench_api_load": "`import hwprof`, `hwprof.load` and every table as a DataFrame, on a run directory",
    "time_report": "`hwprof report`'s wall time on a run directory (text, files, plots) against its 3 s target",
    "stage_cost": "what `with hwprof.stage(...)` and a wrapped known function cost, hwprof running or not",
    "traced_layers_compare": "a TorchScript model's per-layer times against the same program untraced",
    "malloc_faults": "page faults per forward-sized allocation under each malloc setting advise tries",
    "runtime_beside_torch": "OpenVINO's infer() alone and right after a torch op (torch's spinning OpenMP pool)",
    "reference_latency": "a run's model timed by the runtimes' own tools (torch Timer, benchmark_app)",
    "output_check_figures": "what the output check sees on a random-init model: std per conv, |d| and SQNR",
    "ray_sweep_figures": "a `hwprof sweep --ray` on a local cluster: wall time and the bytes moved back",
    "verify_callgrind": "the callgrind pass against itself (spread) and against plain callgrind",
    "bench_startup": "a collect with its passes forked from the zygote against each pass started fresh",
    "bench_peak_probe": "a first run's peak probe: its wall time and peak resident memory, the triad's size",
    "bench_first_run": "a first run's collect (empty cache): each process's largest resident set, by pass",
    "bench_collect_loop": "a default collect against an older checkout's, pass by pass, and against a long run",
    "bench_agent_idle": "a service's request time with its agent started and idle against stopped, ABBA blocks",
    "bench_attach": "a service's request time before, during each window of, and after `hwprof attach`",
}


def listing() -> str:
    width = max(map(len, BENCHMARKS))
    lines = [f"  {name:<{width}}  {what}" for name, what in BENCHMARKS.items()]
    head = "usage: python scripts/bench.py NAME [ARGS...]   (NAME --help: its options; docs/benchmarks.md)"
    return "\n".join([head, "", *lines])


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    name = argv[0].removesuffix(".py").removeprefix("scripts/")
    if name not in BENCHMARKS:
        print(f"bench.py: no benchmark {argv[0]!r}\n\n{listing()}", file=sys.stderr)
        return 2
    return subprocess.run([sys.executable, str(HERE / f"{name}.py"), *argv[1:]], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
