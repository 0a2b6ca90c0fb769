"""The short Rich summary printed at the end of `collect` (and by `report` until the full report exists)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from hwprof.analysis.layers import layer_rows
from hwprof.rundata import RunData

STAGE_ORDER = ("load", "preprocess", "forward", "postprocess", "iteration")
STATUS_STYLE = {
    "ok": "green",
    "partial": "yellow",
    "unavailable": "yellow",
    "failed": "red",
    "skipped": "dim",
    "timeout": "red",
    "interrupted": "red",
}


def _header(data: RunData) -> Text:
    run, model = data.run, data.run.get("model", {})
    host = run.get("host", {})
    cfg = run.get("config", {})
    text = Text()
    text.append(f"run {run.get('run_id')}  ", style="bold")
    text.append(f"[{run.get('status')}]\n", style=STATUS_STYLE.get(run.get("status", ""), ""))
    if model:
        weights = (
            "random init (seeded: compute profile is real, detections are meaningless)"
            if model.get("random_init")
            else str(model.get("weights", {}).get("path", model.get("weights")))
        )
        gflops = f"{model['gflops']:.2f} GFLOPs" if model.get("gflops") else "GFLOPs not measured"
        text.append(
            f"model {model['name']}: {model['layers']} layers, {model['params_fused']:,} params (fused), "
            f"{gflops} at {'x'.join(map(str, model['input_shape']))}\n"
        )
        text.append(f"weights {weights}\n")
    text.append(
        f"host {host.get('cpu_model', '?')}, {cfg.get('threads')} torch threads, "
        f"ISA {host.get('torch', {}).get('cpu_capability', '?')}"
    )
    return text


def stages_table(run: dict[str, Any]) -> Table | None:
    stages = run.get("stages")
    if not stages:
        return None
    whole = stages.get("iteration", {}).get("p50_ms")
    table = Table(title=f"pipeline stages ({run.get('stages_source')} pass, ms)", title_justify="left")
    for col in ("stage", "p50", "p90", "p99", "mean", "stdev", "n", "share"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for name in STAGE_ORDER:
        s = stages.get(name)
        if not s:
            continue
        share = f"{100 * s['p50_ms'] / whole:.1f}%" if whole and name != "iteration" else ""
        table.add_row(
            name,
            f"{s['p50_ms']:.2f}",
            f"{s['p90_ms']:.2f}",
            f"{s['p99_ms']:.2f}",
            f"{s['mean_ms']:.2f}",
            f"{s['stdev_ms']:.2f}",
            str(s["n"]),
            share,
        )
    fps = run.get("fps")
    if fps:
        table.caption = (
            f"{fps:.2f} images/s end to end (batch {run['config']['batch']}, p50 of whole iterations)"
        )
    ref = run.get("collectors", {}).get("timing", {}).get("summary", {}).get("forward_vs_reference")
    if ref:
        table.caption = (table.caption or "") + f"; harness forward / plain model(x) loop = {ref:.3f}"
    return table


def collectors_table(run: dict[str, Any]) -> Table:
    table = Table(title="collectors", title_justify="left")
    for col in ("collector", "pass", "status", "reason / fix"):
        table.add_column(col, overflow="fold")
    for name, c in sorted(run.get("collectors", {}).items()):
        reason = c.get("reason", "")
        if c.get("fix"):
            reason += f"; fix: {c['fix']}"
        style = STATUS_STYLE.get(c.get("status", ""), "")
        table.add_row(name, c.get("pass", ""), Text(c.get("status", ""), style=style), reason)
    return table


def passes_table(run: dict[str, Any]) -> Table | None:
    passes = run.get("passes", {})
    if not passes:
        return None
    table = Table(
        title="passes (forward p50 over the clean timing pass = the pass's overhead)", title_justify="left"
    )
    for col in ("pass", "status", "wall s", "forward p50 ms", "overhead"):
        table.add_column(col, justify="left" if col in ("pass", "status") else "right")
    for name, p in passes.items():
        p50, ratio = p.get("forward_p50_ms"), p.get("overhead_vs_timing")
        table.add_row(
            name,
            Text(p["status"], style=STATUS_STYLE.get(p["status"], "")),
            f"{p['wall_s']:.1f}",
            f"{p50:.2f}" if p50 else "-",
            f"{ratio:.3f}x" if ratio else "-",
        )
    return table


def top_layers_table(data: RunData, top: int = 10) -> Table | None:
    rows = [r for r in layer_rows(data) if "flops" in r and str(r["name"]).count(".") == 1]
    if not rows:
        return None
    total = sum(r["flops"] for r in rows) or 1.0
    rows.sort(key=lambda r: r["flops"], reverse=True)
    table = Table(title=f"top {top} layers by FLOPs", title_justify="left")
    for col in ("layer", "type", "GFLOPs", "share", "params", "out shape", "ms (layers pass)"):
        table.add_column(col, justify="left" if col in ("layer", "type", "out shape") else "right")
    for r in rows[:top]:
        ms = f"{r['time_ms']:.2f}" if "time_ms" in r else "-"
        table.add_row(
            str(r["index"]),
            r["type"],
            f"{r['flops'] / 1e9:.3f}",
            f"{100 * r['flops'] / total:.1f}%",
            f"{r['params']:,}",
            r["out_shape"],
            ms,
        )
    return table


def render_summary(data: RunData, console: Console, top: int = 10) -> None:
    parts: list[Any] = [_header(data)]
    for table in (
        stages_table(data.run),
        passes_table(data.run),
        top_layers_table(data, top),
        collectors_table(data.run),
    ):
        if table is not None:
            parts.append(table)
    console.print(Group(*parts))
