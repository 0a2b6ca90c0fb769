"""What hwprof says on each recorded host (tests/fixtures/hosts/*), replayed in this process, whatever host runs it.

Each folder is a host as scripts/record_host.py writes it (or, where its README says so, constructed from values
recorded elsewhere); hwprof.core.host_facts.RecordedHost reads it in place of this machine. Its expected.json holds
what hwprof says there, check by check, written from hwprof's own answers (`python test_recorded_hosts.py NAME`
prints them) and checked against the recording by reading it. A check a constructed host has no record for is
listed in its `not_recorded`, with why (so is one a recording made before its file was). No model runs: these
are the decisions hwprof takes from the host's facts.

- rapl: the energy source RAPL opens (powercap or perf's power PMU, its domains, why the other was passed over, or
  why neither opened) and the probe's answer (available, or the reason and the fix)
- pmus: the PMUs hwprof's event resolver finds (hwprof.perf.events) and the RAPL domains of the power PMU
- openvino: the precision a bf16 and an fp32 request execute in (rt_openvino.executed_precision, from the
  recorded OPTIMIZATION_CAPABILITIES) and doctor's note
- torch: doctor's note (the CPU capability) and the words of torch's bf16
- isa: the ISA flags recorded, the advice units they give and which runtime uses which (core/isa_units.py)
- paper_peak: its factors and figure (hardware/paper_peak.py)
- perf: perf_event_paranoid, whether perf is there, its version, whether the PMU counts, what perf sampling cannot
  do and why, with the fix (or the probe's answer where perf is missing); a refused counter's words (open_errors)
- gpu: whether the NVIDIA driver is there, and `--device cuda`'s refusal where it is not
"""

from __future__ import annotations

import errno
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hwprof.core.host_facts import NotRecorded, RecordedHost, current, replaying

HOSTS_DIR = Path(__file__).parent / "fixtures" / "hosts"
HOSTS = sorted(p.name for p in HOSTS_DIR.iterdir() if p.is_dir())
CHECKS = ("rapl", "pmus", "openvino", "torch", "isa", "paper_peak", "perf", "gpu")


def said_by_hwprof(text: str, folder: Path) -> str:
    """hwprof's words as the host would have them: its own paths for the recording's copies, the number of reads
    of a polling (the machine's speed, not the host's) as N."""
    return re.sub(r"\(\d+ reads\)", "(N reads)", text.replace(str(folder), ""))


def rapl(folder: Path) -> dict[str, Any]:
    from hwprof.collectors.rapl.collector import RaplCollector
    from hwprof.collectors.rapl.sources import SourceUnavailable, open_source

    from hwprof.core.config import RunConfig

    try:
        opened = open_source(RunConfig())
        opened.close()
        skipped = {zone: said_by_hwprof(why, folder) for zone, why in opened.skipped.items()}
        source = {"kind": opened.kind, "domains": [d.label for d in opened.domains], "skipped": skipped}
    except SourceUnavailable as exc:
        source = {"unavailable": said_by_hwprof(exc.reason, folder)}
    cap = RaplCollector.probe(RunConfig())
    words = {"reason": said_by_hwprof(cap.reason, folder), "fix": said_by_hwprof(cap.fix, folder)}
    return {"source": source, "available": cap.available, **words}


def pmus(folder: Path) -> dict[str, Any]:
    from hwprof.collectors.rapl import perf_energy

    from hwprof.perf.events import load_pmus

    power = current().event_source_root() / "power"
    domains = [d.label for d in perf_energy.perf_domains(power)] if power.is_dir() else []
    return {"pmus": sorted(load_pmus()), "power_domains": domains}


def openvino(folder: Path) -> dict[str, Any]:
    from hwprof.workload.rt_openvino import HINTS, executed_precision, precision_name
    from hwprof.workload.runtime_probe import openvino_note

    capabilities = current().openvino_capabilities()
    executed = {p: executed_precision(p, precision_name(HINTS[p]), capabilities) for p in ("bf16", "fp32")}
    return {
        "capabilities": capabilities,
        "bf16_executed": executed["bf16"],
        "fp32_executed": executed["fp32"],
        "doctor_note": openvino_note(capabilities),
    }


def torch(folder: Path) -> dict[str, Any]:
    from hwprof.workload.runtime import torch_bf16_detail
    from hwprof.workload.runtime_probe import torch_note

    cpu = current().torch_cpu()
    return {
        "capability": cpu.capability,
        "doctor_note": torch_note(cpu.capability),
        "bf16": torch_bf16_detail(cpu.mkldnn),
    }


def isa_flags(folder: Path) -> list[str]:
    """The ISA flags hwprof records from the host's cpuinfo, or a recorded run.json's where no cpuinfo is."""
    from hwprof.core.host import isa_flags as recorded

    try:
        return recorded(current().cpuinfo())
    except NotRecorded:
        if not (folder / "run_host.json").is_file():
            raise
        return list(json.loads((folder / "run_host.json").read_text())["isa_flags"])


def isa(folder: Path) -> dict[str, Any]:
    from hwprof.core.isa_units import units_text, uses_text

    flags = isa_flags(folder)
    return {"flags": flags, "units": units_text(flags), "uses": uses_text(flags)}


def paper_peak(folder: Path) -> dict[str, Any]:
    from hwprof.hardware.paper_peak import paper_peak as peak

    paper = peak(current().cpuinfo())
    figure = round(paper.gflops, 1) if paper.gflops is not None else None
    ghz = round(paper.ghz, 4) if paper.ghz is not None else None
    factors = {"cores": paper.cores, "ghz": ghz, "flop_per_cycle": paper.flop_per_cycle}
    return {**factors, "gflops": figure, "flop_source": paper.flop_source, "text": paper.text()}


def perf(folder: Path) -> dict[str, Any]:
    from hwprof.collectors.perf_sampling import access
    from hwprof.collectors.perf_sampling.collector import PerfSamplingCollector

    from hwprof.core.config import RunConfig
    from hwprof.perf.open_errors import explain, read_paranoid

    paranoid = read_paranoid()
    out: dict[str, Any] = {"paranoid": paranoid, "refused_counter": list(explain(errno.EACCES, paranoid))}
    binary = access.perf_binary(RunConfig())
    if binary is None:  # the probe stops here; where perf is there, it would record a test process for real
        cap = PerfSamplingCollector.probe(RunConfig())
        return {**out, "perf": None, "available": cap.available, "reason": cap.reason, "fix": cap.fix}
    details = access.probe_details(access.sampling_access(binary))
    unavailable = {name: [part.reason, part.fix] for name, part in (details.unavailable or {}).items()}
    return {
        **out,
        "perf": details.version,
        "pmu": details.pmu,
        "user_only": details.user_only,
        "unavailable": unavailable,
        "events": access.sampling_events(RunConfig(), details),
    }


def gpu(folder: Path) -> dict[str, Any]:
    from hwprof.hardware.gpu_device import cuda_unavailable_reason

    driver = current().nvidia_driver()
    return {"nvidia_driver": driver, "cuda_refused": None if driver else cuda_unavailable_reason("cuda")}


SAID: dict[str, Callable[[Path], dict[str, Any]]] = {
    "rapl": rapl,
    "pmus": pmus,
    "openvino": openvino,
    "torch": torch,
    "isa": isa,
    "paper_peak": paper_peak,
    "perf": perf,
    "gpu": gpu,
}


def expected(host: str) -> dict[str, Any]:
    return dict(json.loads((HOSTS_DIR / host / "expected.json").read_text()))


def said(host: str, check: str) -> dict[str, Any]:
    """What hwprof says on the host for one check, replayed here (no HWPROF_* override in the way)."""
    folder = HOSTS_DIR / host
    with replaying(RecordedHost(folder)):
        return SAID[check](folder)


@pytest.fixture(autouse=True)
def no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    from hwprof.core.envvars import EVENT_SOURCE_ROOT, POWERCAP_ROOT

    monkeypatch.delenv(POWERCAP_ROOT.name, raising=False)
    monkeypatch.delenv(EVENT_SOURCE_ROOT.name, raising=False)


@pytest.mark.parametrize("host", HOSTS)
def test_every_host_says_what_it_is_and_what_it_lacks(host: str) -> None:
    """A README (recorded, or constructed and from what), an expected.json that names its kind; a recorded host
    has every check, a constructed one says why each missing check is missing."""
    folder = HOSTS_DIR / host
    assert (folder / "README.md").is_file()
    doc = expected(host)
    assert doc["kind"] in ("recorded", "constructed")
    if doc["kind"] == "constructed":
        assert "constructed" in (folder / "README.md").read_text().lower()
    missing = set(CHECKS) - set(doc)
    assert missing == set(doc.get("not_recorded", {})), f"{host}: say why each check is missing"
    assert all(doc["not_recorded"][check] for check in missing)


@pytest.mark.parametrize(("host", "check"), [(h, c) for h in HOSTS for c in CHECKS if c in expected(h)])
def test_hwprof_says_on_the_recorded_host(host: str, check: str) -> None:
    """What hwprof says, replayed, is expected.json's: each key it lists (a constructed host lists those its
    recorded values decide)."""
    got = said(host, check)
    want = expected(host)[check]
    assert {k: got.get(k) for k in want} == want, f"{host}: {check}"


def write_expected(host: str) -> dict[str, Any]:
    """Every check hwprof can answer on the host (what a new expected.json starts from, to be read and checked)."""
    out: dict[str, Any] = {}
    for check in CHECKS:
        try:
            out[check] = said(host, check)
        except NotRecorded as exc:
            out.setdefault("not_recorded", {})[check] = str(exc)
    return out


if __name__ == "__main__":
    print(json.dumps(write_expected(sys.argv[1]), indent=1))
