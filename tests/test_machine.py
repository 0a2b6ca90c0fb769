"""Machine peaks: measured, cached per host key, re-measured on demand; sysfs cache size parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwprof.hardware import machine, triad
from hwprof.hardware.machine import Peaks, cache_path, llc_bytes, measure_peaks
from hwprof.hardware.triad import MEMORY, SIZE_CAP, triad_size
from hwprof.schema.host import PeaksDoc

MIB = 2**20


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small sizes: the method is the same, the figures are not meant to be peaks. And a quiet host: whether a busy
    one's figures are cached is test_busy_measurement_serves_its_run_only's (injected), not the real load's here,
    which the other pytest-xdist worker makes."""
    monkeypatch.setattr(machine, "busy_while_measuring", lambda *_: False)
    monkeypatch.setattr(machine, "MATMUL_N", 256)
    monkeypatch.setattr(machine, "MATMUL_REPEATS", 3)
    monkeypatch.setattr(machine, "CONV_CHANNELS", 16)
    monkeypatch.setattr(machine, "CONV_HW", 16)
    monkeypatch.setattr(machine, "CONV_REPEATS", 3)
    monkeypatch.setattr(machine, "TRIAD_REPEATS", 3)
    monkeypatch.setattr(triad, "TRIAD_MIN_BYTES", 4 * 2**20)
    monkeypatch.setattr(machine, "llc_bytes", lambda: None)
    # A quiet host whatever this one's load: these tests are about caching real measurements.
    monkeypatch.setattr(machine.HostCpuShare, "others", lambda self: 0.0)
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (0.1, 0.1, 0.1))


def test_measure_then_cache_then_force(tmp_path: Path, small: None) -> None:
    first = measure_peaks(1, directory=tmp_path)
    assert not first.cached
    assert first.gflops > 0 and first.gbps > 0
    assert first.ridge == pytest.approx(first.gflops / first.gbps)
    assert first.gflops == pytest.approx(max(first.gflops_samples), abs=1e-3)  # samples are rounded
    assert len(first.gflops_samples) >= 3 and len(first.gbps_samples) >= 3
    assert "256x256" in first.gflops_method and "1 torch threads" in first.gflops_method
    assert "arrays 3x4 MiB" in first.gbps_method and "12 B per element" in first.gbps_method
    assert first.threads == 1 and first.load_avg_1m is not None
    path = cache_path(1, tmp_path)
    saved = json.loads(path.read_text())
    assert saved["gflops"] == first.gflops and saved["ridge_flop_per_byte"] == pytest.approx(first.ridge)

    again = measure_peaks(1, directory=tmp_path)
    assert again.cached
    assert (again.gflops, again.gbps, again.measured_at) == (first.gflops, first.gbps, first.measured_at)

    forced = measure_peaks(1, force=True, directory=tmp_path)
    assert not forced.cached
    # measured again: on a quiet host merged with the cached one (each figure from the higher, so the samples can be
    # the first's where it reached higher on both; the new compute peak is kept beside it), on a busy one its own
    if forced.source == machine.BUSY_NOT_CACHED:
        assert forced.busy_host and json.loads(path.read_text())["gflops"] == first.gflops
    else:
        assert forced.quiet_gflops is not None and len(forced.quiet_gflops) == 2, forced.quiet_gflops
        assert forced.quiet_gflops[0] == pytest.approx(first.gflops, abs=1e-3)
        assert forced.gflops == pytest.approx(max(first.gflops, forced.quiet_gflops[1]), abs=1e-3)


def test_cache_key_depends_on_threads(tmp_path: Path, small: None) -> None:
    assert cache_path(1, tmp_path) != cache_path(2, tmp_path)
    measure_peaks(2, directory=tmp_path)
    assert cache_path(2, tmp_path).exists() and not cache_path(1, tmp_path).exists()


def test_corrupt_or_foreign_cache_is_measured_again(tmp_path: Path, small: None) -> None:
    path = cache_path(1, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert not measure_peaks(1, directory=tmp_path).cached
    data = json.loads(path.read_text())
    data["host_key"] = "another-host"
    path.write_text(json.dumps(data))
    assert not measure_peaks(1, directory=tmp_path).cached


def test_unwritable_cache_still_measures(tmp_path: Path, small: None) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    peaks = measure_peaks(1, directory=blocker / "sub")
    assert peaks.gflops > 0 and not peaks.cached


def test_bad_thread_count() -> None:
    with pytest.raises(ValueError, match="threads must be at least 1"):
        machine.measure(0)


def test_llc_from_sysfs(tmp_path: Path) -> None:
    for index, (level, size) in enumerate([(1, "32K"), (2, "512K"), (3, "32768K")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    assert llc_bytes(str(tmp_path)) == 32 * 2**20
    assert llc_bytes(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(
    ("llc_mib", "available_mib", "array_mib", "capped", "words"),
    [
        (32, 24 * 1024, 128, "", ["arrays 3x128 MiB; LLC 32 MiB"]),  # STREAM's rule: 4x the LLC
        (None, 24 * 1024, 64, "", ["arrays 3x64 MiB; last-level cache size unknown"]),
        (480, 24 * 1024, 320, SIZE_CAP, ["arrays 3x320 MiB, capped at 320 MiB each; LLC 480 MiB", "cache hits"]),
        (480, 2048, 2048 / 12, MEMORY, ["capped by memory (1/4 of 2,048 MiB available); LLC 480 MiB", "cache hits"]),
        (480, None, 320, SIZE_CAP, ["arrays 3x320 MiB"]),
        (8, 2, 1, MEMORY, ["arrays 3x1 MiB, capped by memory"]),  # never below 1 MiB
    ],
)
def test_triad_arrays_by_cache_bounded_by_memory(
    llc_mib: int | None, available_mib: int | None, array_mib: float, capped: str, words: list[str]
) -> None:
    """Each array 4x the LLC (at least 64 MiB), at most 320 MiB and 1/4 of the available memory for all three."""
    size = triad_size(llc_mib and llc_mib * MIB, available_mib and available_mib * MIB)
    assert size.array_bytes == pytest.approx(array_mib * MIB, abs=4096) and size.array_bytes % 4096 == 0
    assert size.capped_by == capped and size.elements * 4 == size.array_bytes
    if available_mib is not None and available_mib > 8:
        assert 3 * size.array_bytes <= available_mib * MIB / 4
    assert size.below_stream_rule == ("cache hits" in size.text)
    for w in words:
        assert w in size.text, size.text


def test_peaks_record_the_triad_size_and_its_bound(
    tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM that reports a 480 MiB LLC and has 48 MiB available: 4 MiB arrays, and the record says why."""
    monkeypatch.setattr(machine, "llc_bytes", lambda: 480 * MIB)
    monkeypatch.setattr(machine, "available_memory", lambda: 48 * MIB)
    peaks = measure_peaks(1, directory=tmp_path)
    assert (peaks.triad_array_bytes, peaks.llc_bytes, peaks.triad_capped_by) == (4 * MIB, 480 * MIB, MEMORY)
    assert "arrays 3x4 MiB, capped by memory (1/4 of 48 MiB available); LLC 480 MiB" in peaks.gbps_method
    assert "the figure may include cache hits" in peaks.gbps_method
    doc = PeaksDoc.from_json(peaks.to_dict(), "run.json", "peaks.")
    assert doc.triad_array_bytes == 4 * MIB and doc.triad_capped_by == MEMORY
    assert measure_peaks(1, directory=tmp_path).triad_array_bytes == 4 * MIB  # kept in the cache


def test_busy_host_flag() -> None:
    base = dict(
        gflops=100.0,
        gbps=10.0,
        threads=2,
        host_key="k",
        cpu_model="c",
        logical_cpus=2,
        torch_version="t",
        measured_at="now",
        gflops_method="m",
        gbps_method="m",
    )
    assert Peaks(load_avg_1m=8.0, **base).busy_host  # type: ignore[arg-type]
    assert not Peaks(load_avg_1m=1.0, **base).busy_host  # type: ignore[arg-type]
    assert Peaks(load_avg_1m=1.0, interference=0.3, **base).busy_host  # type: ignore[arg-type]
    assert not Peaks(load_avg_1m=1.0, interference=0.02, **base).busy_host  # type: ignore[arg-type]
    assert Peaks(load_avg_1m=1.0, interference=0.3, **base).to_dict()["busy_host"] is True  # type: ignore[arg-type]
    assert Peaks.from_dict(Peaks(load_avg_1m=1.0, **base).to_dict()).ridge == 10.0  # type: ignore[arg-type]


def test_others_share_leaves_out_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """(host busy CPU - own CPU) / (wall x CPUs), from two readings of (monotonic, busy, own)."""
    readings = iter([(10.0, 100.0, 5.0), (12.0, 102.5, 6.5)])  # 2 s; host +2.5 s busy, of which 1.5 s ours
    monkeypatch.setattr(machine.HostCpuShare, "_now", staticmethod(lambda: next(readings)))
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    assert machine.HostCpuShare().others() == pytest.approx(1.0 / 4)


@pytest.mark.slow
def test_others_share_sees_a_busy_sibling_process() -> None:
    """For real: a child process spinning on one core shows up as others' share."""
    import subprocess
    import sys
    import time

    spin = "import time\nt = time.monotonic() + 1.5\nwhile time.monotonic() < t: pass"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.2)
        share = machine.HostCpuShare()
        time.sleep(0.8)
        busy = share.others()
    finally:
        child.wait()
    assert busy is not None and busy > 0.5 / (machine.os.cpu_count() or 1), busy


@pytest.mark.slow
def test_real_size_measurement_within_budget(tmp_path: Path) -> None:
    """The sizes the session uses. Each probe stops repeating once it has spent BUDGET_S (after 3
    repeats): about 3 x 2.5 s in all here. Only a gross bound on wall time (a loaded CI host is slow);
    the figure itself is printed by `hwprof doctor --peaks --force`."""
    peaks = measure_peaks(1, directory=tmp_path)
    assert peaks.measure_s < 60
    assert 3 <= len(peaks.gbps_samples) <= machine.TRIAD_REPEATS
    assert f"{machine.MATMUL_N}x{machine.MATMUL_N}" in peaks.gflops_method and "3x3 conv" in peaks.gflops_method
    assert peaks.gflops == pytest.approx(max(peaks.gflops_probes.values()), abs=1e-3)
    assert peaks.interference is not None


def _probe(*results: tuple[float, float, float]) -> tuple[list[int], object]:
    """An injected probe: each call gives the next (gflops, gbps, others' CPU share) as Peaks; calls counted."""
    calls: list[int] = []
    queue = list(results)

    def probe(threads: int) -> Peaks:
        calls.append(threads)
        gflops, gbps, others = queue.pop(0)
        return Peaks(
            gflops=gflops,
            gbps=gbps,
            threads=threads,
            host_key=machine.host_key(threads),
            cpu_model="c",
            logical_cpus=2,
            torch_version="t",
            measured_at=f"call {len(calls)}",
            load_avg_1m=0.5,
            gflops_method="probe",
            gbps_method="triad",
            gflops_samples=[round(gflops * 0.75, 3), gflops],
            gbps_samples=[gbps],
            interference=others,
        )

    return calls, probe


def test_busy_measurement_serves_its_run_only(tmp_path: Path) -> None:
    """Busy: used, flagged, never cached; the next run measures again, and a quiet one is cached."""
    calls, probe = _probe((297.1, 10.0, 0.56), (300.0, 11.0, 0.40), (444.3, 12.0, 0.02))
    busy = measure_peaks(2, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    assert busy.busy_host and busy.source == machine.BUSY_NOT_CACHED and busy.gflops == 297.1
    assert not cache_path(2, tmp_path).exists() and busy.quiet_gflops == []
    doc = PeaksDoc.from_json(busy.to_dict(), "run.json", "peaks.")
    assert doc.busy_host and doc.source == "busy" and doc.gflops_spread == [222.825, 297.1]
    assert measure_peaks(2, directory=tmp_path, probe=probe).source == machine.BUSY_NOT_CACHED  # type: ignore[arg-type]
    quiet = measure_peaks(2, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    assert len(calls) == 3 and quiet.source == machine.MEASURED_QUIET and quiet.gflops == 444.3
    again = measure_peaks(2, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    assert len(calls) == 3 and again.cached and again.source == machine.CACHED and again.gflops == 444.3


def test_cache_keeps_the_highest_quiet_measurement(tmp_path: Path) -> None:
    """A VM only runs slower than its peak: a lower quiet measurement (forced) never lowers the cache."""
    calls, probe = _probe((444.3, 12.0, 0.01), (334.0, 13.5, 0.03), (463.0, 11.0, 0.0), (100.0, 1.0, 0.9))
    first = measure_peaks(2, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    lower = measure_peaks(2, force=True, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    assert lower.gflops == 444.3 and lower.measured_at == first.measured_at  # the higher compute kept
    assert lower.gbps == 13.5 and lower.gbps_samples == [13.5]  # each figure from the one that reached higher
    assert lower.quiet_gflops == [444.3, 334.0]
    higher = measure_peaks(2, force=True, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    assert higher.gflops == 463.0 and higher.gflops_spread == [347.25, 463.0] and higher.gbps == 13.5
    busy = measure_peaks(2, force=True, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    assert busy.gflops == 100.0 and busy.source == machine.BUSY_NOT_CACHED
    cached = measure_peaks(2, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    assert len(calls) == 4 and cached.cached and cached.gflops == 463.0
    assert cached.quiet_gflops == [444.3, 334.0, 463.0]


def test_busy_or_older_cache_entries_are_not_used(tmp_path: Path) -> None:
    """A version-3 entry (it may hold a busy host's figures) or a busy entry: measured again."""
    calls, probe = _probe((400.0, 12.0, 0.0), (410.0, 12.0, 0.0))
    measure_peaks(1, directory=tmp_path, probe=probe)  # type: ignore[arg-type]
    path = cache_path(1, tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "version": 3}))
    assert not measure_peaks(1, directory=tmp_path, probe=probe).cached  # type: ignore[arg-type]
    path.write_text(json.dumps({**json.loads(path.read_text()), "interference": 0.5}))
    assert machine.load_cached(1, tmp_path) is None and len(calls) == 2
