"""Where the layers pass's paired cost goes: one part switched on at a time, paired in one process.

Each variant is a fresh child process (perf's inherited counters must be open before torch starts its
thread pool, or the workers are not counted and a read sends them no IPI) that runs the forward in ABBA
blocks (hwprof.session.paired.abba_forward): the "off" iterations are the clean forward (no layer hooks,
no collector), the "on" ones add the variant's parts. Variants run in turn, `--repeats` times, so that
drift hits each alike; the median of each child's median block ratio is printed with its range.

  hooks               the layer hooks and the marker bus (a MarkerLog subscribed): no collector
  hooks+subscriber    the same with one subscriber that does nothing: the bus's fan-out per marker
  perf every 1s       perf_events reading at every marker, its interval sampler at 1 s
  perf rotate 1s      perf_events rotating its layer reads, interval sampler at 1 s
  perf rotate         perf_events rotating, interval sampler at --interval-ms (the default pass)
  perf every          perf_events reading at every marker, sampler at --interval-ms (the old default)
  perf no layer reads perf_events reading only at the stage and iteration markers: its cost beside the layer reads
  perf rotate sampler-on    rotating, with the interval sampler left on in the forward (extra.sampler_in_forward)
  perf every model-thread   reading at every marker the counters of the model's thread alone (--counter-threads
                      model, a GPU run's default): no read interrupts another CPU
  perf rotate model-thread  the same, rotating
  perf no layer reads model-thread  the model thread's counters read at the stage and iteration markers only
  profiler            torch_profiler as the trace pass runs it after its first measured iteration (no oneDNN
                      verbose), its ranges at every marker
  profiler no-shapes  the same without record_shapes
  pyspy               py-spy attached as the trace pass attaches it, stopped in the clean iterations
  profiler+pyspy      the trace pass's two collectors together

    python scripts/bench_layers_pass_parts.py --model yolov7-tiny --imgsz 320 --threads 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    "hooks": {"collectors": []},
    "hooks+subscriber": {"collectors": [], "noop_subscriber": True},
    "perf every 1s": {"collectors": ["perf_events"], "counter_reads": "every", "interval_ms": 1000.0},
    "perf rotate 1s": {"collectors": ["perf_events"], "counter_reads": "rotate", "interval_ms": 1000.0},
    "perf rotate": {"collectors": ["perf_events"], "counter_reads": "rotate"},
    "perf every": {"collectors": ["perf_events"], "counter_reads": "every"},
    "perf no layer reads": {"collectors": ["perf_events"], "extra": {"counter_reads_every": 100000}},
    "perf no layer reads model-thread": {
        "collectors": ["perf_events"],
        "counter_threads": "model",
        "extra": {"counter_reads_every": 100000},
    },
    "perf every model-thread": {"collectors": ["perf_events"], "counter_reads": "every", "counter_threads": "model"},
    "perf rotate model-thread": {"collectors": ["perf_events"], "counter_reads": "rotate", "counter_threads": "model"},
    "perf rotate sampler-on": {"collectors": ["perf_events"], "extra": {"sampler_in_forward": True}},
    "profiler": {"collectors": ["torch_profiler"], "extra": {"onednn_verbose": False}},
    "profiler no-shapes": {
        "collectors": ["torch_profiler"],
        "extra": {"onednn_verbose": False, "profiler_shapes": False},
    },
    "pyspy": {"collectors": [], "pyspy": True},
    "pyspy@20": {"collectors": [], "pyspy": True, "pyspy_rate": 20},
    "pyspy@200": {"collectors": [], "pyspy": True, "pyspy_rate": 200},
    "profiler+pyspy": {"collectors": ["torch_profiler"], "extra": {"onednn_verbose": False}, "pyspy": True},
}


class PySpyBench:
    """py-spy attached to this process with the trace pass's command line (collectors/pyspy), stopped (SIGSTOP) in
    the clean iterations and continued in the measured ones, as collectors/pyspy/switch.py does."""

    name = "pyspy"
    order = 50

    def __init__(self, config: Any) -> None:
        self.config = config
        self.process: Any = None

    def open(self, ctx: Any) -> None:
        import os
        import signal
        import time

        from hwprof.collectors.pyspy.collector import pyspy_binary, record_command

        binary = pyspy_binary(self.config)
        if binary is None:
            raise FileNotFoundError("py-spy not found; fix: pip install py-spy")
        command = record_command(binary, os.getpid(), self.config, "chrometrace", ctx.out_dir / "pyspy.json")
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached
        self.process.send_signal(signal.SIGSTOP)

    def prepare(self, ctx: Any) -> None:
        pass

    def start(self, ctx: Any) -> None:
        import signal

        self.process.send_signal(signal.SIGCONT)

    def stop(self, ctx: Any) -> None:
        import signal

        self.process.send_signal(signal.SIGSTOP)

    def on_marker(self, marker: Any) -> None:
        pass

    def wants_layer_markers(self) -> bool:
        return False

    def close(self, ctx: Any) -> Any:
        import signal

        from hwprof.collectors.base import CollectorResult

        self.process.send_signal(signal.SIGCONT)
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        return CollectorResult("ok")


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One variant's ABBA figures (runs in a fresh process: nothing imported torch before the collectors open)."""
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import MarkerBus
    from hwprof.session import paired
    from hwprof.session.registry import by_name

    variant = VARIANTS[spec["variant"]]
    keys = ("counter_reads", "counter_threads", "interval_ms", "pyspy_rate")
    overrides = {k: variant[k] for k in keys if k in variant}
    if "interval_ms" not in overrides:
        overrides["interval_ms"] = spec["interval_ms"]
    config = RunConfig(
        model=spec["model"],
        imgsz=spec["imgsz"],
        threads=spec["threads"],
        warmup=spec["warmup"],
        iters=2 * spec["pairs"],
        extra=dict(variant.get("extra", {})),
        **overrides,
    )
    if variant.get("noop_subscriber"):
        subscribe = MarkerBus.subscribe

        def with_noop(bus: MarkerBus, subscriber: Any, layers: bool = True) -> None:
            subscribe(bus, subscriber, layers)
            if len(bus._subscribers) == 1:
                subscribe(bus, lambda _marker: None)

        MarkerBus.subscribe = with_noop  # type: ignore[method-assign]

    def make(c: RunConfig) -> list[Any]:
        chosen: list[Any] = [by_name()[n](c) for n in variant["collectors"]]
        return chosen + ([PySpyBench(c)] if variant.get("pyspy") else [])

    figures = paired.abba_forward(config, make, spec["pairs"], toggle_hooks=True)
    return figures.to_dict()


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="yolov7-tiny")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=16, help="on/off pairs per child")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS))
    args = parser.parse_args()
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    print(
        f"layers pass parts: {args.model} at {args.imgsz}, {args.threads} threads, {args.pairs} pairs x {args.repeats}"
    )
    ratios: dict[str, list[float]] = {v: [] for v in names}
    forward: dict[str, list[float]] = {v: [] for v in names}
    for rep in range(args.repeats):
        for name in names:
            spec = {**vars(args), "variant": name}
            done = subprocess.run(
                [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, check=False
            )
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
            if done.returncode != 0 or not lines:
                print(f"  {name}: child failed: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
                continue
            figures = json.loads(lines[-1])
            ratios[name].append(figures["ratio_median_block"])
            forward[name].append(figures["forward_p50_off_ms"])
            print(f"  repeat {rep} {name:18s} median block ratio {figures['ratio_median_block']:.4f}", flush=True)
    print(f"\n{'variant':18s} {'ratio':>7s} {'range':>15s} {'clean forward ms':>17s}")
    for name in names:
        if ratios[name]:
            r = ratios[name]
            print(
                f"{name:18s} {statistics.median(r):7.4f} {min(r):7.3f}..{max(r):.3f} "
                f"{statistics.median(forward[name]):17.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
