"""The kernel's share, named: callchains parsed from real `perf script` output, kernel samples charged to
the cause their callchain shows (page fault, syscall, IPI, interrupt), stored per layer in the kernels
file, read back (old files too, by leaf), and the findings that name it per layer."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from hwprof.collectors.perf_sampling.data_tables import cause_of, code_of
from hwprof.collectors.perf_sampling.script import KIND_KERNEL, Sample, finish_counts, parse_script

from hwprof.analysis.finding import Finding
from hwprof.analysis.kernel_findings import PAGE_FAULT_MIN, kernel_findings
from hwprof.analysis.run_analysis import analyse
from hwprof.core.kernel_causes import (
    CAUSE_FAULT,
    CAUSE_INTERRUPT,
    CAUSE_IPI,
    CAUSE_OTHER,
    CAUSE_SYSCALL,
    cause_of_chain,
    cause_of_leaf,
)
from hwprof.core.kernels import KINDS, attribute, tables_dict
from hwprof.core.markers import read_markers
from hwprof.core.native_view import native_view
from hwprof.core.spans import measured_pieces, measured_spans
from hwprof.render.kernel_tables import native_kernels_spec
from hwprof.rundir.reader import RunData
from hwprof.schema.kernels_file import KernelsFile

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = FIXTURES / "perf_sampling"
REPORT_RUN = FIXTURES / "rundir_report"
KERNELS_JSON = "passes/kernels/perf_sampling.kernels.json"
HEADER = re.compile(r"^\S.*\s(\d+)\s+\[\d+\]\s+(\d+)\.(\d+):\s+\d+\s+cpu-clock:\s*$")


def _text(name: str) -> list[str]:
    with gzip.open(RECORDED / f"{name}.script.txt.gz", "rt") as f:
        return f.read().splitlines()


def _samples(name: str) -> list[Sample]:
    samples = list(parse_script(_text(name)))
    finish_counts(samples)
    return samples


def _chains(lines: list[str]) -> list[list[str]]:
    """Each sample's frames as perf script printed them, read independently of the parser."""
    chains: list[list[str]] = []
    for line in lines:
        if HEADER.match(line):
            chains.append([])
        elif line.startswith("\t") and chains:
            chains[-1].append(line.strip())
    return chains


def _doc(name: str, rename: dict[str, str] | None = None) -> dict:
    """The kernels file the collector writes for the recording (its layers renamed as `rename` says)."""
    samples = _samples(name)
    markers = read_markers(RECORDED / f"{name}.markers.jsonl")
    if rename:
        markers = [dataclasses.replace(m, name=rename.get(m.name, m.name)) for m in markers]
    pieces = measured_pieces(markers)
    doc = tables_dict(attribute(samples, code_of, pieces, cause_of), [], KINDS)
    doc.update(rate_hz=2000, sampling_event="cpu-clock", callchains=any(s.kernel_chain is not None for s in samples))
    return doc


# ----------------------------------------------------------------------------- parsing


def test_a_recording_with_callchains_gives_one_sample_per_header_with_its_leaf_and_kernel_frames() -> None:
    lines = _text("callchains")
    chains = _chains(lines)
    samples = _samples("callchains")
    assert len(samples) == len(chains) > 1000
    kernel = 0
    for sample, frames in zip(samples, chains, strict=True):
        leaf = frames[0].split(None, 1)
        assert sample.ip == int(leaf[0], 16), "the leaf is the first frame"
        assert sample.kernel_chain is not None
        in_kernel = [f.split(None, 1)[1].rsplit(" (", 1)[0] for f in frames if "[kernel.kallsyms]" in f]
        if code_of(sample).kind == KIND_KERNEL:
            kernel += 1
            assert sample.kernel_chain[0] == sample.sym
            assert list(sample.kernel_chain) == in_kernel[: len(sample.kernel_chain)]
            assert len(sample.kernel_chain) > 1, "the chain reaches past the leaf"
        else:
            assert sample.kernel_chain == ()
    assert kernel > 300


def test_a_recording_without_callchains_keeps_no_chain() -> None:
    assert all(s.kernel_chain is None for s in _samples("cpu_clock"))


# ----------------------------------------------------------------------------- causes


def test_each_layer_of_the_recording_gets_the_cause_its_program_made() -> None:
    """model.0 faults fresh pages in, model.1 makes syscalls, model.2 computes (callchains_program.py)."""
    doc = _doc("callchains")
    assert doc["callchains"] is True
    layers = doc["layers"]
    causes = {name: {c["cause"]: c for c in layers[name]["kernel_causes"]} for name in layers}
    faults = causes["model.0"][CAUSE_FAULT]
    assert faults["share"] >= 0.5 * layers["model.0"]["kinds"][KIND_KERNEL] and faults["share"] > 0.4
    assert faults["parts"][0][0] == "page zeroing"
    syscalls = causes["model.1"][CAUSE_SYSCALL]
    assert syscalls["share"] > 0.9 * layers["model.1"]["kinds"][KIND_KERNEL]
    assert {"newfstatat", "getppid"} <= {part for part, _ in syscalls["parts"]}
    assert layers["model.2"]["kinds"].get(KIND_KERNEL, 0.0) < 0.15
    for row in layers.values():
        kernel = row["kinds"].get(KIND_KERNEL, 0.0)
        assert sum(c["share"] for c in row["kernel_causes"]) == pytest.approx(kernel)
        assert row["kernel_by_leaf"] == 0.0


def test_the_fault_share_counts_every_sample_under_a_fault_entry_not_only_named_ones() -> None:
    """By callchain, a fault's locks, memcg charge and page allocation are the fault's: the share is
    every forward sample whose frames pass through exc_page_fault, which the leaf names undercount."""
    lines = _text("callchains")
    samples = _samples("callchains")
    spans = measured_spans(read_markers(RECORDED / "callchains.markers.jsonl"))
    forward = [(s.start_ns, s.end_ns) for s in spans if s.kind == "stage" and s.name == "forward"]
    inside = [any(a <= s.t_ns < b for a, b in forward) for s in samples]
    under_fault = [any(" exc_page_fault " in f for f in c) for c in _chains(lines)]
    expected = sum(i and u for i, u in zip(inside, under_fault, strict=True)) / sum(inside)
    doc = _doc("callchains")
    by_chain = next(c for c in doc["forward"]["kernel_causes"] if c["cause"] == CAUSE_FAULT)
    assert by_chain["share"] == pytest.approx(expected, abs=0.005)
    named = [k for k in doc["kernels"] if k["kind"] == KIND_KERNEL and cause_of_leaf(k["name"]).cause == CAUSE_FAULT]
    assert by_chain["share"] > sum(k["share"] for k in named) > 0


CHAINS = [
    (
        "_raw_spin_unlock_irqrestore memcg1_commit_charge __mem_cgroup_charge do_anonymous_page "
        "__handle_mm_fault handle_mm_fault do_user_addr_fault exc_page_fault asm_exc_page_fault",
        CAUSE_FAULT,
        "memcg charge",
    ),
    (
        "_raw_spin_lock futex_wait_setup futex_wait do_futex __x64_sys_futex do_syscall_64 "
        "entry_SYSCALL_64_after_hwframe",
        CAUSE_SYSCALL,
        "futex",
    ),
    (
        "smp_call_function_many_cond on_each_cpu_cond_mask flush_tlb_mm_range zap_page_range_single "
        "do_madvise __x64_sys_madvise do_syscall_64 entry_SYSCALL_64_after_hwframe",
        CAUSE_IPI,
        "TLB shootdown",
    ),
    (
        "flush_tlb_func __flush_smp_call_function_queue __sysvec_call_function sysvec_call_function "
        "asm_sysvec_call_function",
        CAUSE_IPI,
        "TLB shootdown",
    ),
    (
        "hrtimer_interrupt __sysvec_apic_timer_interrupt sysvec_apic_timer_interrupt "
        "asm_sysvec_apic_timer_interrupt clear_page_erms do_anonymous_page exc_page_fault",
        CAUSE_INTERRUPT,
        "sysvec_apic_timer_interrupt",
    ),
    ("worker_thread kthread ret_from_fork", CAUSE_OTHER, "ret_from_fork"),
]
"""Kernel frames leaf first, as in this kernel's chains (the fixture's and perf's own), with their cause."""


@pytest.mark.parametrize(("frames", "cause", "part"), CHAINS)
def test_the_innermost_entry_of_a_chain_decides(frames: str, cause: str, part: str) -> None:
    got = cause_of_chain(tuple(frames.split()))
    assert (got.cause, got.part, got.by_leaf) == (cause, part, False)


def test_without_a_callchain_a_kernel_sample_is_charged_by_its_leaf_and_marked() -> None:
    samples = _samples("cpu_clock")
    pieces = measured_pieces(read_markers(RECORDED / "cpu_clock.markers.jsonl"))
    tables = attribute(samples, code_of, pieces, cause_of)
    fwd = tables.forward
    assert fwd.kinds[KIND_KERNEL] > 0
    assert fwd.by_leaf == pytest.approx(fwd.kinds[KIND_KERNEL]) == pytest.approx(sum(fwd.causes.values()))
    assert cause_of_leaf("clear_page_erms").cause == CAUSE_FAULT
    assert cause_of_leaf("_raw_spin_lock") == cause_of_leaf("_raw_spin_lock")
    assert cause_of_leaf("_raw_spin_lock").by_leaf


# ----------------------------------------------------------------------------- the kernels file


def test_the_causes_round_trip_through_the_kernels_file() -> None:
    doc = _doc("callchains")
    view = native_view(KernelsFile.from_json(json.loads(json.dumps(doc)), "perf_sampling.kernels.json"))
    assert view.callchains
    layer = view.layers["model.0"]
    assert layer.causes[0].cause == CAUSE_FAULT and layer.by_leaf == 0.0
    assert layer.cause_share(CAUSE_FAULT) == pytest.approx(doc["layers"]["model.0"]["kernel_causes"][0]["share"])


def test_an_older_kernels_file_still_loads_with_its_causes_by_leaf() -> None:
    doc = json.loads((REPORT_RUN / KERNELS_JSON).read_text())
    assert "kernel_causes" not in doc["forward"]
    view = native_view(KernelsFile.from_json(doc, KERNELS_JSON))
    assert not view.callchains
    fwd = view.forward
    assert fwd.by_leaf == pytest.approx(fwd.kernel_space_share)
    assert sum(c.share for c in fwd.causes) == pytest.approx(fwd.kernel_space_share)


# ----------------------------------------------------------------------------- findings and report


@pytest.fixture
def run_with_kernel_layers(tmp_path: Path) -> Path:
    """The report's fixture run with its kernels file replaced by the one the callchains recording gives,
    its faulting layer placed as layer 2 (10% of that run's forward; its layer 0 is under 2%): layer 2 in
    the kernel by faults, layer 1 by syscalls, layer 0 computing."""
    run = tmp_path / "run"
    shutil.copytree(REPORT_RUN, run)
    doc = _doc("callchains", rename={"model.0": "model.2", "model.2": "model.0"})
    (run / KERNELS_JSON).write_text(json.dumps(doc))
    return run


def test_a_layer_mostly_in_the_kernel_gets_a_finding_naming_its_cause(run_with_kernel_layers: Path) -> None:
    """Every kernel finding (the report keeps the ten heaviest of all findings: layer 2's is among them)."""
    a = analyse(RunData.load(run_with_kernel_layers))
    doc = json.loads((run_with_kernel_layers / KERNELS_JSON).read_text())
    by_topic: dict[str, list[Finding]] = {}
    for f in kernel_findings(a.layers):
        by_topic.setdefault(f.topic, []).append(f)
    assert any(f.title.startswith("layer 2 ") for f in a.findings)
    layer2 = next(f for f in by_topic["kernel-faults"] if f.title.startswith("layer 2 "))
    kernel2 = doc["layers"]["model.2"]["kinds"][KIND_KERNEL]
    assert f"{100 * kernel2:.0f}% of its samples in the kernel" in layer2.title
    assert "page faults (page zeroing" in layer2.title
    assert "the page-fault finding" in layer2.evidence  # its why and method, said once there (issue 68)
    layer1 = next(f for f in by_topic["kernel-syscalls"] if f.title.startswith("layer 1 "))
    assert "syscalls (newfstatat" in layer1.title
    assert not any(f.title.startswith("layer 0 ") for f in kernel_findings(a.layers))
    faults = next(f for f in by_topic["kernel-faults"] if f.title.startswith("page faults take"))
    assert faults.weight >= PAGE_FAULT_MIN
    assert "by the kernel entry of each sample's callchain" in faults.evidence
    assert faults.title.endswith("an allocator that keeps freed memory avoids most (hwprof advise measures it)")


def test_the_kernels_table_shows_each_layers_kernel_share_and_cause(run_with_kernel_layers: Path) -> None:
    spec = native_kernels_spec(analyse(RunData.load(run_with_kernel_layers)))
    assert spec is not None
    headers = [c.header for c in spec.cols]
    assert "in kernel" in headers
    cells = {row[0]: row[headers.index("in kernel")] for row in spec.rows if row[0]}
    assert any("faults" in cell for cell in cells.values()), cells
    assert any("syscalls" in note and "by callchain" in note for note in spec.notes), spec.notes


def test_the_kernel_fault_findings_name_their_layers_and_point_to_the_allocator(run_with_kernel_layers: Path) -> None:
    """Both fault findings (the layer's and forward's) have topic kernel-faults, name the faulting layer, and
    make the allocator candidates runnable; without them the candidates are not proposed."""
    from test_advice_candidates import facts

    from hwprof.analysis.advice.candidates import candidates

    found = [f for f in kernel_findings(analyse(RunData.load(run_with_kernel_layers)).layers)]
    faults = [f for f in found if f.topic == "kernel-faults"]
    assert {f.title.split(" ")[0] for f in faults} == {"layer", "page"}
    assert all(2 in f.layers for f in faults)
    by_key = {c.key: c for c in candidates(facts(), faults)}
    assert by_key["malloc-keep"].finding in {f.title for f in faults}
    assert by_key["malloc-keep"].layers and 2 in by_key["malloc-keep"].layers
    others = [f for f in found if f.topic != "kernel-faults"]
    assert not {c.key: c for c in candidates(facts(), others)}["malloc-keep"].finding


def test_the_page_fault_finding_names_what_its_layers_allocate_and_fault(run_with_kernel_layers: Path) -> None:
    """With torch_memory's allocator figures (issue 59), the forward's fault finding says per faulting layer the
    bytes it allocates per forward and its page faults (perf_events', in the same layers pass)."""
    from hwprof.collectors.torch_profiler.memory import memory_units

    from hwprof.schema.records import MetricTables

    metrics_path = run_with_kernel_layers / "passes" / "layers" / "torch_memory.metrics.json"
    MetricTables(layers={"model.2": {"mem_alloc_bytes": 5.2e6}}, units=memory_units()).save(metrics_path)
    a = analyse(RunData.load(run_with_kernel_layers))
    faults = next(f for f in kernel_findings(a.layers) if f.title.startswith("page faults take"))
    layer2 = next(r for r in a.layers.layers if r.name == "model.2")
    counted = layer2.metrics["perf_events.page-faults"]
    assert f"per forward they allocate (torch's allocator) and fault 2: 5.2 MB ({counted:.0f} faults)" in (
        faults.evidence
    )


def test_layers_of_one_cause_are_one_finding_and_its_why_is_said_once(run_with_kernel_layers: Path) -> None:
    """Issue 68: the allocator paragraph was printed five times, a finding per faulting layer, word for word. Two
    layers faulting give one kernel finding naming both; the why is the page-fault finding's, said there once."""
    doc = json.loads((run_with_kernel_layers / KERNELS_JSON).read_text())
    doc["layers"]["model.1"] = copy.deepcopy(doc["layers"]["model.2"])  # layer 1 now faults as layer 2 does
    (run_with_kernel_layers / KERNELS_JSON).write_text(json.dumps(doc))
    found = kernel_findings(analyse(RunData.load(run_with_kernel_layers)).layers)
    faulting = [f for f in found if f.topic == "kernel-faults" and f.title.startswith("layer")]
    assert len(faulting) == 1 and set(faulting[0].layers) == {1, 2}, [f.title for f in faulting]
    assert faulting[0].title.startswith("layers ") and "of their samples in the kernel, mostly page faults" in (
        faulting[0].title
    )
    why = "an allocator that keeps freed memory"
    assert sum(why in f.evidence for f in found) == 1  # the page-fault finding's, not again per layer


def test_a_layer_mostly_in_the_kernel_is_not_labelled_by_its_roof(run_with_kernel_layers: Path) -> None:
    """Issue 68: layer 0 was "bound: compute" at 6.9% of its roof while 69% of its samples were in the kernel, 92%
    of them page faults. The report's bound column says the kernel's cause where it holds most of the samples."""
    from hwprof.analysis.layers.stats import KERNEL_BOUND

    a = analyse(RunData.load(run_with_kernel_layers))
    for row in a.layers.top_level:
        native = row.native
        if native is not None and native.kernel_space_share >= KERNEL_BOUND and native.causes:
            assert row.bound_shown == f"kernel: {native.causes[0].cause}", row.name
        else:
            assert row.bound_shown == row.bound, row.name
    kernel_bound = [r for r in a.layers.top_level if (r.bound_shown or "").startswith("kernel: ")]
    assert kernel_bound, [(r.name, r.native.kernel_space_share if r.native else None) for r in a.layers.top_level]
    assert all(r.bound in ("memory", "compute", None) for r in a.layers.top_level)  # the roofline's side is kept
