"""Does the trace show what the report counts? Three checks of a trace in Perfetto's trace processor.

- every forward on every track that has layers (a clean iteration's aside: its layer hooks are off by
  design, so it must have none) has exactly the model's number of direct layer
  children (a sample drawn as a slice across a layer boundary steals layers from it);
- no layer slice has a parent other than a forward or a layer;
- for each layer, the CPU samples (`perf_sample`) whose instant lies in its time ranges in the
  kernels pass, less those in its child layers (the tables charge a sample to the innermost layer),
  equal the report's per-layer sample count (the kernels table of the run's analysis);
- and where samples are still drawn as slices (py-spy's runs of an unchanged stack), no such slice
  crosses a layer boundary of its process.

Used by scripts/check_trace_layers.py and the tests; the SQL runs in the trace processor
(render/trace_processor.py), the expected figures come from the run directory.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.analysis.layers.sources import load_native
from hwprof.core.kernels import BETWEEN_LAYERS
from hwprof.rundir.reader import RunData
from hwprof.trace.model import STACK_CATEGORIES
from hwprof.trace.processor import QueryRow, TraceSession, sql_int, sql_text

FORWARD_CHILDREN = """
select f.id, f.ts, f.track_id, f.category,
  (select count(*) from slice c where c.parent_id = f.id and c.category glob 'layer*') as layers
from slice f
where f.name = 'forward' and f.category glob 'stage*'
  and exists (select 1 from slice l where l.track_id = f.track_id and l.category glob 'layer*')
order by f.ts
"""
BAD_PARENTS = """
select l.id, l.name, l.ts, p.name as parent, p.category as parent_category
from slice l left join slice p on p.id = l.parent_id
where l.category glob 'layer*'
  and (p.id is null or not (p.category glob 'layer*' or (p.category glob 'stage*' and p.name = 'forward')))
order by l.ts
"""
LAYER_SAMPLES = """
select l.id, l.parent_id, l.depth, a.display_value as layer,
  (select count(*) from perf_sample ps
   where ps.ts >= l.ts and ps.ts < l.ts + l.dur
     and ps.utid in (select utid from thread where upid = t.upid)) as samples
from slice l
join thread_track tt on tt.id = l.track_id
join thread t using (utid)
join args a on a.arg_set_id = l.arg_set_id and a.key = 'debug.qualified_name'
where l.category = 'layer'
  and t.upid in (select distinct th.upid from perf_sample ps join thread th using (utid))
"""
"""Measured layers (category 'layer', not 'layer,warmup') of the process that has the samples."""
STACKS_ACROSS_LAYERS = """
with layers as (
  select l.ts, l.ts + l.dur as e, t.upid from slice l join thread_track tt on tt.id = l.track_id
  join thread t using (utid) where l.category glob 'layer*'),
stacks as (
  select s.ts, s.ts + s.dur as e, p.upid from slice s join process_track p on p.id = s.track_id
  where s.category in ({categories}))
select (select count(*) from stacks) as slices, (select count(*) from stacks s where exists (
  select 1 from layers l where l.upid = s.upid and l.ts < s.e and l.e > s.ts
  and not (s.ts >= l.ts and s.e <= l.e))) as across
"""


@dataclass
class LayerCheck:
    model_layers: int
    forwards: int
    forward_children: Counter[int]
    """Direct layer children of a forward -> how many forwards have that many."""
    bad_parents: list[QueryRow]
    bad_parent_kinds: Counter[str]
    perf_samples: int
    layers_compared: int
    """Layers with a sample count in the report or in the trace."""
    layer_mismatches: list[tuple[str, int, int]] = field(default_factory=list)
    """(layer, report's samples, trace's samples) where they differ."""
    stack_slices: int = 0
    """Sampled stacks drawn as slices (py-spy)."""
    stack_slices_across_layers: int = 0

    clean_forwards: int = 0
    """Forwards of a paired pass's clean iterations (collectors and layer hooks off)."""
    clean_forwards_with_layers: int = 0

    @property
    def forwards_ok(self) -> bool:
        measured = set(self.forward_children) == {self.model_layers}
        return self.forwards > 0 and measured and not self.clean_forwards_with_layers

    @property
    def ok(self) -> bool:
        samples_ok = self.layers_compared > 0 and not self.layer_mismatches
        return self.forwards_ok and not self.bad_parents and samples_ok and not self.stack_slices_across_layers

    def lines(self) -> list[str]:
        children = ", ".join(f"{n} layers: {c}" for n, c in sorted(self.forward_children.items()))
        kinds = ", ".join(f"{k}: {n}" for k, n in self.bad_parent_kinds.most_common())
        out = [
            f"1. forwards on tracks with layers: {self.forwards}; direct layer children (model has "
            f"{self.model_layers}) -> forwards: {children or 'none'}; clean forwards (hooks off): "
            f"{self.clean_forwards}, {self.clean_forwards_with_layers} with layers"
            + ("  OK" if self.forwards_ok else "  WRONG"),
            f"2. layer slices whose parent is neither a forward nor a layer: {len(self.bad_parents)}"
            + (f" (parents: {kinds})" if kinds else "")
            + ("  OK" if not self.bad_parents else "  WRONG"),
        ]
        for row in self.bad_parents[:3]:
            out.append(f"   e.g. {row['name']!r} under {row['parent']!r} [{sql_text(row['parent_category'])}]")
        agree = self.layers_compared - len(self.layer_mismatches)
        samples_ok = self.layers_compared > 0 and agree == self.layers_compared
        out.append(
            f"3. perf_sample rows: {self.perf_samples}; layers whose samples in the trace equal the report's: "
            f"{agree} of {self.layers_compared}" + ("  OK" if samples_ok else "  WRONG")
        )
        for layer, want, got in self.layer_mismatches[:5]:
            out.append(f"   e.g. {layer}: report {want}, trace {got}")
        out.append(
            f"4. sampled-stack slices (py-spy): {self.stack_slices}; crossing a layer boundary: "
            f"{self.stack_slices_across_layers}" + ("  OK" if not self.stack_slices_across_layers else "  WRONG")
        )
        return out


def model_layer_count(run: RunData) -> int:
    return run.model_file.top_level_layers


def self_samples(rows: list[QueryRow]) -> Counter[str]:
    """Per layer: samples in its slices less those in its child layer slices (self, as the tables)."""
    inside = {r["id"]: sql_int(r["samples"]) for r in rows}
    own = dict(inside)
    for r in rows:
        if r["parent_id"] in inside:
            own[r["parent_id"]] -= inside[r["id"]]
    out: Counter[str] = Counter()
    for r in rows:
        out[str(r["layer"])] += own[r["id"]]
    return out


def check_layers(tp: TraceSession, run_dir: Path | str) -> LayerCheck:
    run = RunData.load(run_dir)
    every_forward = tp.query(FORWARD_CHILDREN)
    clean: list[QueryRow] = []
    forwards: list[QueryRow] = []
    for row in every_forward:
        (clean if "clean" in str(row["category"]).split(",") else forwards).append(row)
    bad = tp.query(BAD_PARENTS)
    perf_samples = tp.query("select count(*) as n from perf_sample")[0]["n"]
    in_trace = self_samples(tp.query(LAYER_SAMPLES)) if perf_samples else Counter()
    native = load_native(run)
    layers = native.layers if native else {}
    report = {name: layer.samples for name, layer in layers.items() if name != BETWEEN_LAYERS}
    names = sorted(set(report) | set(in_trace))
    wanted = {n: report.get(n, 0) for n in names}
    mismatches = [(n, wanted[n], in_trace[n]) for n in names if wanted[n] != in_trace[n]]
    categories = ", ".join(f"'{c}'" for c in sorted(STACK_CATEGORIES))
    stacks = tp.query(STACKS_ACROSS_LAYERS.format(categories=categories))[0]
    return LayerCheck(
        model_layers=model_layer_count(run),
        forwards=len(forwards),
        forward_children=Counter(sql_int(r["layers"]) for r in forwards),
        clean_forwards=len(clean),
        clean_forwards_with_layers=sum(1 for r in clean if sql_int(r["layers"])),
        bad_parents=bad,
        bad_parent_kinds=Counter(str(r["parent_category"] or "(no parent)") for r in bad),
        perf_samples=sql_int(perf_samples),
        layers_compared=len(names),
        layer_mismatches=mismatches,
        stack_slices=sql_int(stacks["slices"]),
        stack_slices_across_layers=sql_int(stacks["across"]),
    )
