"""A default collect's wall time, pass by pass, against an older checkout's on the same host in the same run, and
what the faster default gives against a long run of the same code ("nothing lost").

Three collects of `--model M --imgsz N` (`--no-report`), one after the other: BEFORE (a git worktree of --before at
a temporary folder, run through PYTHONPATH with this venv's packages; skipped without --before), AFTER (this
checkout, default options: each pass stopping when its figures are resolved) and LONG (this checkout,
`--iters --long-iters`). Printed: each collect's wall time from outside and each pass's wall time, measured
iterations and why it stopped; the AFTER/BEFORE ratio; then AFTER against LONG:
- the forward p50, with each run's 95% order-statistic interval (hwprof.session.timing_stop): agree where the
  intervals overlap;
- the top 15 layers' shares of the forward: agree where they differ by no more than the layers pass's margin
  (hwprof.session.pass_stop: 10% of the share or half a point of the forward, whichever is wider);
- the forward's top kernels' shares (perf samples, kernels pass): agree within two binomial standard errors of
  the two shares combined;
- each pass's cost: agree where the two runs' spreads (quartiles, or range under 4 blocks) overlap.
A row that does not agree is marked; a host that was busy shows it in the pass walls (compare within one run).

    python scripts/bench_collect_loop.py --model yolov7-tiny --imgsz 320 --before ce09519
    python scripts/bench_collect_loop.py --model yolov7 --before ce09519 --long-iters 60
    python scripts/bench_collect_loop.py --model yolov7-tiny --imgsz 320 --before ce09519 -- --advise
    python scripts/bench_collect_loop.py --model yolov7-tiny --imgsz 320 --long-iters 60 --control

--control adds a second default run after the long one and holds the first against it with the same rules: two
identical runs of this code on this host, so that a figure OFF against the long run and OFF against its own rerun
is the host's drift between runs, not what the default measures less well.

--pairs N (with --before) runs N BEFORE, AFTER pairs one after the other and prints each pair's ratio and their
median: one pair's ratio moves with the host's hour (0.36-0.44x at yolov7 640 on one 2-vCPU EPYC in a day).
    python scripts/bench_collect_loop.py --model yolov7 --before ce09519 --pairs 3

--interleave (with --long-iters) holds the figures pass by pass instead: after the whole collects, each pass of the
default is run again alone (`--only` its collectors: the same plan and stopping rule), then the same pass long, then
(with --control) the default pass once more, one pass after the other, so that the two runs a figure compares are
seconds apart, not minutes: the host drifts less between them.
    python scripts/bench_collect_loop.py --model yolov7-tiny --imgsz 320 --long-iters 60 --interleave --control
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOP_LAYERS = 15
TOP_KERNELS = 8


def worktree(rev: str, folder: Path) -> Path:
    """A checkout of `rev` that `python -m hwprof` runs from PYTHONPATH (collectors/ linked where the install maps
    it: hwprof.collectors)."""
    src = folder / f"src-{rev}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(src), rev], check=True,
                   capture_output=True)  # fmt: skip
    (src / "hwprof" / "collectors").symlink_to(src / "collectors")
    return src


def collect(name: str, options: list[str], out: Path, src: Path | None, reuse: bool = False) -> dict[str, Any]:
    if reuse and (out / "run.json").is_file():  # --reuse: read again (its wall time from run.json's passes)
        run = json.loads((out / "run.json").read_text())
        return {"wall": sum(p.get("wall_s", 0) for p in run["passes"].values()), "run": run, "dir": out, "reused": True}
    env = {**os.environ, "COLUMNS": "200"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = [sys.executable, "-P", "-m", "hwprof", "collect", *options, "--no-report", "--out", str(out)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"bench_collect_loop.py: the {name} collect exited {done.returncode}: {done.stderr.strip()[-800:]}")
    print(f"{name}: {wall:.1f} s ({' '.join(options)})", flush=True)
    return {"wall": wall, "run": json.loads((out / "run.json").read_text()), "dir": out}


def measured(p: dict[str, Any]) -> int | None:
    shapes = (p.get("inputs") or {}).get("shapes") or {}
    counts = [s.get("measured") for s in shapes.values() if s.get("measured") is not None]
    return sum(counts) if counts else (p.get("stopping") or {}).get("iterations")


def print_passes(runs: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'run':<7} {'pass':<9} {'wall s':>7} {'measured':>8}  why it stopped")
    for name, r in runs.items():
        for pass_name, p in r["run"]["passes"].items():
            why = (p.get("stopping") or {}).get("text") or "its --iters (no rule)"
            print(f"{name:<7} {pass_name:<9} {p.get('wall_s', 0):7.1f} {measured(p) or '-':>8}  {why}")
        print(f"{name:<7} {'(whole)':<9} {r['wall']:7.1f}")


PHASES = ("start_s", "build_s", "wait_s", "warmup_s", "measure_s", "finish_s", "read_s")
"""run.json's passes.<pass>.phases (hwprof.session.pass_phases), in order. A pass launched beside the previous pass's
close (hwprof.session.turn) has wait_s: its start, build and wait lie beside that pass, outside its own wall."""


def print_phases(runs: dict[str, dict[str, Any]]) -> None:
    """Where each run's time went, pass by pass and summed, with the collect's own time outside the passes: the fixed
    parts (start, build, warm-up, finish, read, outside) beside the forwards the rules measured."""
    timed = {name: r for name, r in runs.items() if any(p.get("phases") for p in r["run"]["passes"].values())}
    if not timed:
        return
    heads = " ".join(f"{h.removesuffix('_s'):>8}" for h in PHASES)
    print(f"\n{'run':<7} {'pass':<9} {heads} {'warm-ups':>8}")
    for name, r in timed.items():
        sums = dict.fromkeys(PHASES, 0.0)
        for pass_name, p in r["run"]["passes"].items():
            phases = p.get("phases") or {}
            for h in PHASES:
                sums[h] += phases.get(h, 0.0)
            cells = " ".join(f"{phases.get(h, 0.0):8.2f}" for h in PHASES)
            print(f"{name:<7} {pass_name:<9} {cells} {(p.get('stopping') or {}).get('warmup', '-'):>8}")
        outside = r["wall"] - sum(p.get("wall_s", 0) for p in r["run"]["passes"].values())
        said = "not known (--reuse)" if r.get("reused") else f"{outside:.2f}"
        cells = " ".join(f"{sums[h]:8.2f}" for h in PHASES)
        print(f"{name:<7} {'(sum)':<9} {cells}   outside the passes {said}")
        beside = [p["phases"] for p in r["run"]["passes"].values() if "wait_s" in (p.get("phases") or {})]
        if beside:
            overlap = sum(ph.get("start_s", 0.0) + ph.get("build_s", 0.0) for ph in beside)
            print(f"{name:<7} {len(beside)} passes launched beside the previous one's close: {overlap:.2f} s of start "
                  "and build outside their walls")  # fmt: skip


def beyond_floor(run_dir: Path, pass_name: str, floor: int) -> tuple[int, float] | None:
    """The measured iterations a pass ran past its rule's floor (run.json's stopping.floor) and the seconds they
    took with the clean ones beside them: from the end of the floor-th measured iteration (a paired pass's floor is
    whole ABBA blocks: it ends its last block) to the end of the pass's last iteration, from its markers. None
    without markers or iterations."""
    from hwprof.core.markers import read_markers
    from hwprof.core.spans import pair_spans

    path = run_dir / "passes" / pass_name / "markers.jsonl"
    if not path.is_file():
        return None
    spans = [s for s in pair_spans(read_markers(path)) if s.kind == "iteration" and not s.warmup and s.iteration >= 0]
    measured = sorted(s.end_ns for s in spans if not s.clean)
    if len(measured) <= floor or floor <= 0:
        return (0, 0.0) if measured else None
    last = max(s.end_ns for s in spans)
    return len(measured) - floor, (last - measured[floor - 1]) / 1e9


def print_floor(runs: dict[str, dict[str, Any]]) -> None:
    """Where the default's time went past its rules' floors: the iterations each pass measured beyond the fewest its
    rule asks for (stopping.floor), which this host's spread of its figures took, and the collect at its floors
    (its wall less those seconds) against BEFORE: what the same code takes where every figure resolves at once."""
    r = runs.get("after")
    if r is None or r.get("reused"):
        return
    rows, extra = [], 0.0
    for pass_name, p in r["run"]["passes"].items():
        floor = (p.get("stopping") or {}).get("floor")
        got = beyond_floor(r["dir"], pass_name, floor) if floor else None
        if got is None:
            continue
        rows.append(f"after   {pass_name:<9} {floor:>5} {measured(p) or '-':>8} {got[0]:>7} {got[1]:9.2f}")
        extra += got[1]
    if not rows:
        return
    print(f"\n{'run':<7} {'pass':<9} {'floor':>5} {'measured':>8} {'past it':>7} {'seconds':>9}")
    print("\n".join(rows))
    at_floor = r["wall"] - extra
    line = f"after at its floors: {at_floor:.1f} s ({extra:.1f} s past them)"
    if "before" in runs:
        line += f", {at_floor / runs['before']['wall']:.2f}x of before"
    print(line)


def print_advice(name: str, run_dir: Path) -> None:
    """`--advise`'s own time and its first three rows as the table orders them, where the run has advice."""
    path = run_dir / "advice.json"
    if not path.is_file():
        return
    doc = json.loads(path.read_text())
    rows = sorted(doc["rows"], key=lambda r: (not r.get("ranked"), -((r.get("forward") or {}).get("ratio") or 0.0)))
    top = ", ".join(f"{r['key']} {(r.get('forward') or {}).get('ratio', 0):.2f}x" for r in rows[:3])
    print(f"{name}: advise {doc.get('wall_s')} s for {len(doc['rows'])} rows; first three: {top}")


def _interval(values: list[float]) -> tuple[float, float] | None:
    from hwprof.analysis.order_stats import median_interval

    return median_interval(values)


def forward_values(run_dir: Path) -> list[float]:
    from hwprof.core.markers import read_markers
    from hwprof.core.spans import durations_ms, measured_spans

    markers = read_markers(run_dir / "passes" / "timing" / "markers.jsonl")
    return durations_ms(measured_spans(markers), "stage").get("forward", [])


def agree_forward(a: Path, b: Path) -> tuple[str, bool]:
    fa, fb = forward_values(a), forward_values(b)
    ia, ib = _interval(fa), _interval(fb)
    ok = ia is not None and ib is not None and ia[0] <= ib[1] and ib[0] <= ia[1]
    text = f"forward p50 {statistics.median(fa):.1f} ms {ia} vs {statistics.median(fb):.1f} ms {ib}"
    return text, ok


def agree_layers(a: Path, b: Path) -> list[tuple[str, bool]]:
    import hwprof
    from hwprof.session.pass_stop import LAYER_POINTS, LAYER_TOLERANCE

    la = {r["layer"] if "layer" in r else r["name"]: r["share"] for r in hwprof.load(a).layers.to_dicts()}
    lb = {r["layer"] if "layer" in r else r["name"]: r["share"] for r in hwprof.load(b).layers.to_dicts()}
    top = sorted((n for n in la if la[n] is not None), key=lambda n: -la[n])[:TOP_LAYERS]
    rows = []
    for name in top:
        sa, sb = la[name], lb.get(name)
        margin = max(LAYER_TOLERANCE * sa, LAYER_POINTS)
        ok = sb is not None and abs(sa - sb) <= margin
        rows.append((f"layer {name}: {sa:.2%} vs {sb:.2%} (margin +-{margin:.2%})" if sb is not None else name, ok))
    return rows


def agree_kernels(a: Path, b: Path) -> list[tuple[str, bool]]:
    import hwprof

    ka = {r["kernel"]: r for r in hwprof.load(a).model_kernels.to_dicts()}
    kb = {r["kernel"]: r for r in hwprof.load(b).model_kernels.to_dicts()}
    na = sum(r["samples"] or 0 for r in ka.values()) or 1
    nb = sum(r["samples"] or 0 for r in kb.values()) or 1
    rows = []
    for name in list(ka)[:TOP_KERNELS]:
        sa = ka[name]["share"] or 0.0
        sb = (kb.get(name) or {}).get("share") or 0.0
        se = math.sqrt(sa * (1 - sa) / na + sb * (1 - sb) / nb)
        rows.append((f"kernel {name[:40]}: {sa:.2%} vs {sb:.2%} (2 s.e. {2 * se:.2%})", abs(sa - sb) <= 2 * se))
    return rows


def agree_costs(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, bool]]:
    rows = []
    for name, pa in a["passes"].items():
        ca, cb = pa.get("overhead"), (b["passes"].get(name) or {}).get("overhead")
        if not ca or not cb:
            continue

        def spread(c: dict[str, Any]) -> tuple[float, float]:
            low, high = (c.get("q1"), c.get("q3")) if c.get("blocks", 0) >= 4 else (c.get("low"), c.get("high"))
            return (low if low is not None else c["ratio"], high if high is not None else c["ratio"])

        (a0, a1), (b0, b1) = spread(ca), spread(cb)
        ok = a0 <= b1 and b0 <= a1
        rows.append((f"{name} cost {ca['ratio']:.3f}x [{a0:.3f}, {a1:.3f}] vs {cb['ratio']:.3f}x [{b0:.3f}, {b1:.3f}]",
                     ok))  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov7")
    parser.add_argument("--imgsz", default="640")
    parser.add_argument("--before", help="a git revision to time beside this checkout (e.g. ce09519)")
    parser.add_argument("--long-iters", type=int, default=0, help="also a run at --iters N to compare with")
    parser.add_argument("--out", type=Path, help="where the runs go (default: a temporary folder, kept)")
    parser.add_argument("--reuse", action="store_true", help="read the runs already in --out instead of collecting")
    parser.add_argument(
        "--control",
        action="store_true",
        help="after the long run, the default once more: how far two identical runs of this host agree",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="compare pass by pass: each pass alone, default then long (then default again), one after another",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="with --before: this many BEFORE, AFTER pairs one after the other; each pair's ratio and their median",
    )
    parser.add_argument("collect_args", nargs="*", help="after --: more collect options for every run (--advise)")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="hwprof-loop-"))
    folder.mkdir(parents=True, exist_ok=True)
    options = ["--model", args.model, "--imgsz", args.imgsz, *args.collect_args]
    load = os.getloadavg()[0]
    runs: dict[str, dict[str, Any]] = {}
    ratios: list[float] = []
    """AFTER / BEFORE of each pair (--pairs), the first pair's the runs the tables below read."""
    if args.before:
        befores = ["before", *(f"before-{k}" for k in range(2, args.pairs + 1))]
        kept = args.reuse and all((folder / name).is_dir() for name in befores)
        src = None if kept else worktree(args.before, folder)
        try:
            runs["before"] = collect("before", options, folder / "before", src, args.reuse)
            runs["after"] = collect("after", options, folder / "after", None, args.reuse)
            ratios.append(runs["after"]["wall"] / runs["before"]["wall"])
            for k in range(2, args.pairs + 1):  # the same pair again, one after the other: the host's spread
                before = collect(f"before {k}", options, folder / f"before-{k}", src, args.reuse)
                after = collect(f"after {k}", options, folder / f"after-{k}", None, args.reuse)
                ratios.append(after["wall"] / before["wall"])
        finally:
            if src is not None:  # the checkout is this repository's worktree: removed with its record
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(src)], check=False)
    else:
        runs["after"] = collect("after", options, folder / "after", None, args.reuse)
    against: dict[str, list[tuple[str, bool]]] = {}
    """"long" and "again": each figure of the default run against the long run's, and against its rerun's."""
    if args.interleave and args.long_iters:
        against = interleaved(runs["after"], options, args, folder)
        titles = {
            "long": f"nothing lost, pass by pass: the default against --iters {args.long_iters} seconds later",
            "again": "the control, pass by pass: the default against itself seconds later",
        }
    else:
        if args.long_iters:
            long_options = [*options, "--iters", str(args.long_iters)]
            runs["long"] = collect("long", long_options, folder / "long", None, args.reuse)
            against["long"] = figure_rows(runs["after"], runs["long"])
        if args.control:
            runs["again"] = collect("again", options, folder / "again", None, args.reuse)
            against["again"] = figure_rows(runs["after"], runs["again"])
        titles = {
            "long": f"nothing lost: after (default) against long (--iters {args.long_iters})",
            "again": "the control: after (default) against again (default, after the long run)",
        }
    print(f"\nload average {load:.2f} before, {os.getloadavg()[0]:.2f} after; runs in {folder}")
    print_passes(runs)
    print_phases(runs)
    print_floor(runs)
    for name, r in runs.items():
        print_advice(name, r["dir"])
    if "before" in runs:
        print(f"\nafter / before: {runs['after']['wall'] / runs['before']['wall']:.2f}x of the whole collect")
    if len(ratios) > 1:
        each = ", ".join(f"{r:.3f}x" for r in ratios)
        print(f"{len(ratios)} pairs, one after the other: {each}; median {statistics.median(ratios):.3f}x")
    for name, rows in against.items():
        print_rows(titles[name], rows)
    if "long" in against and "again" in against:
        lost = [long for (long, ok), (_, ok_again) in zip(against["long"], against["again"], strict=True)
                if not ok and ok_again]  # fmt: skip
        print(f"\nOFF against the long run while the default agrees with its own rerun: {len(lost)}")
        for text in lost:
            print(f"  {text}")
    return 0


def figure_rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, bool]]:
    """The figures two runs both hold (a run of one pass holds that pass's), each with whether they agree."""
    passes = set(a["run"]["passes"]) & set(b["run"]["passes"])
    rows = [agree_forward(a["dir"], b["dir"])] if "timing" in passes else []
    rows += agree_layers(a["dir"], b["dir"]) if "layers" in passes else []
    rows += agree_kernels(a["dir"], b["dir"]) if "kernels" in passes else []
    return rows + agree_costs(a["run"], b["run"])


def print_rows(title: str, rows: list[tuple[str, bool]]) -> None:
    print(f"\n{title}")
    for text, ok in rows:
        print(f"  {'ok ' if ok else 'OFF'} {text}")
    print(f"{sum(ok for _, ok in rows)} of {len(rows)} figures agree")


def interleaved(
    after: dict[str, Any], options: list[str], args: argparse.Namespace, folder: Path
) -> dict[str, list[tuple[str, bool]]]:
    """--interleave: each pass of the default run alone, default then long (then default again), pass by pass; the
    default's figures against the long run's ("long") and its rerun's ("again")."""
    long_options = ["--iters", str(args.long_iters)]
    against: dict[str, list[tuple[str, bool]]] = {"long": [], "again": []} if args.control else {"long": []}
    for name, p in after["run"]["passes"].items():
        only = ["--only", ",".join(p["collectors"])]
        here = folder / "interleaved" / name
        fast = collect(f"after {name}", [*options, *only], here / "after", None, args.reuse)
        against["long"] += figure_rows(fast, collect(f"long {name}", [*options, *only, *long_options],
                                                      here / "long", None, args.reuse))  # fmt: skip
        if args.control:
            against["again"] += figure_rows(fast, collect(f"again {name}", [*options, *only], here / "again", None,
                                                           args.reuse))  # fmt: skip
    return against


if __name__ == "__main__":
    sys.exit(main())
