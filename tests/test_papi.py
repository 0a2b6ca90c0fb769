"""The PAPI backend: the real failure path of this host, and the success path with a fake PAPI."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hwprof.collectors.base import PassContext
from hwprof.collectors.papi import collector as papi_mod

from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus
from hwprof.schema.probes import PapiProbe
from hwprof.schema.records import MetricTables

Papi = papi_mod.Papi


def _component_disabled() -> tuple[bool, str]:
    api = papi_mod.load_api()
    if not api.low.is_initialized():
        api.low.library_init()
    info = api.low.get_component_info(0)
    return bool(info.disabled), str(info.disabled_reason)


def test_real_papi_probe_and_collector() -> None:
    """Here (no PMU) add_event raises PapiMiscellaneousError and start PapiNoComponentError."""
    disabled, why = _component_disabled()
    config = RunConfig(counters="papi")
    capability = Papi.probe(config)
    collector = Papi(config)
    collector.open(PassContext(config, Path("/nonexistent"), "layers", MarkerBus()))
    result = collector.close(PassContext(config, Path("/nonexistent"), "layers", MarkerBus()))
    if not disabled:
        assert capability.available, capability.sentence()
        return
    assert not capability.available
    # the component's own reason, not the library's errors (issue 68: "Component Index isn't set (PAPI_ENOCMP)")
    assert capability.reason.startswith("PAPI component ") and why in capability.reason
    assert "PAPI_ENOCMP" not in capability.reason and "PAPI counts no hardware event here" in capability.reason
    assert isinstance(capability.details, PapiProbe) and "PAPI_TOT_CYC" in (capability.details.failed or {})
    assert "pmu=on" in capability.fix and "--counters perf" in capability.fix
    assert isinstance(capability.details, PapiProbe)
    assert set(capability.details.failed or {}) == set(papi_mod.DEFAULT_PRESETS)
    assert result.status == "unavailable"
    assert result.reason == capability.reason and result.fix == capability.fix


class FakeError(Exception):
    pass


class FakeLow:
    """python-papi's papi_low: every read advances cycles by 1000 and instructions by 500."""

    STEP: dict[int, int] = {1: 1000, 2: 500, 3: 4}  # noqa: RUF012

    def __init__(self, refuse: tuple[int, ...] = ()) -> None:
        self.refuse = refuse
        self.codes: list[int] = []
        self.reads = 0
        self.initialized = False
        self.calls: list[str] = []

    def is_initialized(self) -> int:
        return int(self.initialized)

    def library_init(self) -> None:
        self.initialized = True

    def create_eventset(self) -> int:
        self.codes = []
        return 7

    def add_event(self, es: int, code: int) -> None:
        if code in self.refuse:
            raise FakeError("Event does not exist. (PAPI_ENOEVNT)")
        self.codes.append(code)

    def add_named_event(self, es: int, name: str) -> None:
        raise FakeError(f"no native event {name}")

    def start(self, es: int) -> None:
        self.calls.append("start")

    def read(self, es: int) -> list[int]:
        self.reads += 1
        return [self.STEP[c] * self.reads for c in self.codes]

    def stop(self, es: int) -> list[int]:
        self.calls.append("stop")
        return self.read(es)

    def cleanup_eventset(self, es: int) -> None:
        self.calls.append("cleanup")

    def destroy_eventset(self, es: int) -> None:
        self.calls.append("destroy")

    def get_component_info(self, index: int) -> Any:
        return SimpleNamespace(name="perf_event", disabled=0, disabled_reason="")


def _fake_api(monkeypatch: pytest.MonkeyPatch, low: FakeLow) -> None:
    events = SimpleNamespace(PAPI_TOT_CYC=1, PAPI_TOT_INS=2, PAPI_L3_TCM=3, PAPI_FP_OPS=4)
    api = papi_mod.PapiApi(low, events, FakeError)
    monkeypatch.setattr(papi_mod, "load_api", lambda: api)


def test_success_path_with_fake_papi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    low = FakeLow(refuse=(4,))
    _fake_api(monkeypatch, low)
    config = RunConfig(counters="papi", events=["PAPI_TOT_CYC", "PAPI_TOT_INS", "PAPI_L3_TCM", "PAPI_FP_OPS"])
    assert Papi.probe(config).available
    bus = MarkerBus()
    ctx = PassContext(config, tmp_path, "layers", bus)
    ctx.out_dir.mkdir(parents=True)
    collector = Papi(config)
    collector.open(ctx)
    bus.subscribe(collector.on_marker)
    for i in (-1, 0, 1):
        bus.iteration, bus.warmup = i, i < 0
        with bus.span("iteration", "iteration"), bus.span("stage", "forward"):
            with bus.span("layer", "model.0", 0):
                pass
            with bus.span("layer", "model.1", 1), bus.span("layer", "model.1.m", 1):
                pass
    result = collector.close(ctx)
    assert low.calls[-3:] == ["stop", "cleanup", "destroy"]
    assert result.status == "partial" and "PAPI_FP_OPS" in result.reason
    s = result.to_dict()["summary"]
    assert s["events_opened"] == ["PAPI_TOT_CYC", "PAPI_TOT_INS", "PAPI_L3_TCM"]
    assert "NOT counted" in s["counted"]
    assert s["iterations_measured"] == 2 and s["read_cost"]["reads"] == 2 * 10
    assert s["checks"]["layers_plus_gap_vs_forward"]["PAPI_TOT_CYC"]["ratio"] == pytest.approx(1.0)
    tables = MetricTables.load(tmp_path / "passes" / "layers" / "papi.metrics.json")
    # one interval per leaf layer; model.1 owns the interval between its child's end and its own end
    assert tables.layers["model.0"]["PAPI_TOT_CYC"] == 1000
    assert tables.layers["model.1.m"]["PAPI_TOT_INS"] == 500
    assert tables.layers["model.1"]["PAPI_TOT_CYC"] == 2000
    assert tables.layers["model.1"]["PAPI_TOT_CYC.inclusive"] == 3000
    assert tables.layers["model.0"]["CPI"] == pytest.approx(2.0)
    assert tables.layers["model.0"]["LLC MPKI"] == pytest.approx(4 / 500 * 1000)
    assert "PAPI_FP_OPS" not in tables.layers["model.0"]
    forward = tables.stages["forward"]
    assert forward["gap.PAPI_TOT_CYC"] == 3000  # before model.0, between the layers, after model.1
    assert forward["PAPI_TOT_CYC"] == 7 * 1000
    header = json.loads((tmp_path / "passes" / "layers" / "papi.readings.jsonl").read_text().splitlines()[0])
    assert header["groups"] == [{"index": 0, "events": ["PAPI_TOT_CYC", "PAPI_TOT_INS", "PAPI_L3_TCM"]}]


def test_fake_papi_with_nothing_addable_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_api(monkeypatch, FakeLow(refuse=(1, 2, 3, 4)))
    capability = Papi.probe(RunConfig(counters="papi", events=["PAPI_TOT_CYC", "PAPI_TOT_INS"]))
    assert not capability.available
    assert capability.reason.startswith("add_event(PAPI_TOT_CYC, PAPI_TOT_INS): FakeError")
    assert "no event could be added" in capability.reason


def test_papi_wanted_only_with_counters_papi() -> None:
    assert not Papi.wanted(RunConfig())
    assert Papi.wanted(RunConfig(counters="papi"))
    assert Papi.wanted(RunConfig(counters="papi", only=["perf_events"]))
    assert not Papi.wanted(RunConfig(counters="papi", only=["timing"]))
    assert not Papi.wanted(RunConfig(counters="papi", skip=["papi"]))
    assert Papi.wanted(RunConfig(only=["papi"]))
