#!/usr/bin/env python
"""Record this host's answers to the questions hwprof asks of a host, into a folder a test can replay
(hwprof.core.host_facts.RecordedHost; tests/test_recorded_hosts.py replays every folder of tests/fixtures/hosts/).

    python scripts/record_host.py tests/fixtures/hosts/NAME

The layout is the one of shared/hosts/ (README.md there): cpuinfo.txt, lscpu.txt, cpu_online.txt, uname.txt,
paranoid.txt, powercap.txt, event_source_devices.txt, event_source_detail.txt, power_pmu_files.txt,
perf_version.txt, perf_stat_cycles.txt, perf_power.txt, perf_psys.txt, torch_facts.json, openvino_facts.txt; and
what the replay reads besides: the sysfs folders themselves (sys/bus/event_source/devices/<pmu>/{type, cpumask,
format/, events/}, sys/class/powercap's zones), id.txt (the user), nvidia.txt (the NVIDIA driver's control
device, the GPUs). The facts hwprof replays are read through hwprof's own MachineFacts, so a recording holds what
hwprof reads. Run it as the user hwprof runs as (perf's answers depend on it). Then write the folder's
expected.json from what hwprof says there (`cd tests && python test_recorded_hosts.py NAME`), checked against the
recording by reading it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from hwprof.core.host_facts import EVENT_SOURCE, NVIDIA_CTL, POWERCAP, MachineFacts

ENERGY_SECONDS = "0.5"
"""How long perf stat -a counts each power event (sleep's argument)."""


def run(*command: str) -> str:
    """Standard output and error of a command, as it printed them; its absence said in one line."""
    if shutil.which(command[0]) is None:
        return f"{command[0]}: not found on PATH\n"
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        return f"{exc}\n"


def copy_small_files(source: Path, target: Path, names: tuple[str, ...], folders: tuple[str, ...]) -> None:
    """source's files `names` and every file of its `folders`, as text (sysfs files are small)."""
    for name in names:
        if (source / name).is_file():
            target.mkdir(parents=True, exist_ok=True)
            (target / name).write_text(read(source / name))
    for folder in folders:
        if (source / folder).is_dir():
            for file in sorted((source / folder).iterdir()):
                if file.is_file():
                    (target / folder).mkdir(parents=True, exist_ok=True)
                    (target / folder / file.name).write_text(read(file))


def event_sources(out: Path) -> list[str]:
    """The PMUs perf lists: their listing, each one's files and events, and a copy of what hwprof reads."""
    devices = sorted(p.name for p in EVENT_SOURCE.iterdir()) if EVENT_SOURCE.is_dir() else []
    (out / "event_source_devices.txt").write_text("".join(f"{d}\n" for d in devices))
    detail, files = [], []
    for name in devices:
        device = EVENT_SOURCE / name
        events = sorted(p.name for p in (device / "events").iterdir()) if (device / "events").is_dir() else []
        listing = sorted(p.name for p in device.iterdir())
        detail.append(
            f"== {device}\n"
            + "".join(f"{x}\n" for x in listing)
            + read(device / "type")
            + "".join(f"{e}\n" for e in events)
        )
        if name in ("power", "msr"):
            for sub in ("events", "format"):
                for file in sorted((device / sub).iterdir()) if (device / sub).is_dir() else []:
                    files.append(f"== {file}\n{read(file)}")
            if (device / "cpumask").is_file():
                files.append(f"== {device / 'cpumask'}\n{read(device / 'cpumask')}")
        copy_small_files(device, out / EVENT_SOURCE.relative_to("/") / name, ("type", "cpumask"), ("format", "events"))
    (out / "event_source_detail.txt").write_text("".join(detail))
    (out / "power_pmu_files.txt").write_text("".join(files))
    power = EVENT_SOURCE / "power" / "events"
    return sorted(p.name for p in power.iterdir() if "." not in p.name) if power.is_dir() else []


def powercap(out: Path) -> None:
    """Its listing (or why there is none), and each zone's name, range and energy, sub-zones in their zone."""
    (out / "powercap.txt").write_text(run("ls", "-la", str(POWERCAP)))
    if not POWERCAP.is_dir():
        return
    for zone in sorted(POWERCAP.iterdir()):
        if zone.name.startswith("intel-rapl") and ":" in zone.name and zone.is_dir():
            names = ("name", "max_energy_range_uj", "energy_uj", "enabled")
            copy_small_files(zone, out / POWERCAP.relative_to("/") / zone.name, names, ())
            for sub in sorted(zone.iterdir()):
                if sub.name.startswith(zone.name + ":") and sub.is_dir():
                    copy_small_files(sub, out / POWERCAP.relative_to("/") / zone.name / sub.name, names, ())


def energy(out: Path, events: list[str], perf: str | None) -> None:
    """perf stat -a of each power event over ENERGY_SECONDS (energy-pkg asked for even where none is listed)."""
    if perf is None:
        for name in ("perf_power.txt", "perf_psys.txt"):
            (out / name).write_text("perf: not found on PATH\n")
        return
    others = [e for e in dict.fromkeys(["energy-pkg", *events]) if e != "energy-psys"]
    stat = [perf, "stat", "-a", "-e"]
    (out / "perf_power.txt").write_text("".join(run(*stat, f"power/{e}/", "sleep", ENERGY_SECONDS) for e in others))
    (out / "perf_psys.txt").write_text(run(*stat, "power/energy-psys/", "sleep", ENERGY_SECONDS))


def runtimes(out: Path, facts: MachineFacts) -> tuple[str, str]:
    """torch's and OpenVINO's view of this CPU, as hwprof asks them."""
    try:
        import torch

        cpu = facts.torch_cpu()
        torch_facts = {
            "torch": torch.__version__,
            "cpu_capability": cpu.capability,
            "mkldnn": cpu.mkldnn,
            "threads": torch.get_num_threads(),
        }
        (out / "torch_facts.json").write_text(json.dumps(torch_facts) + "\n")
        torch_line = f"torch {torch.__version__}: CPU capability {cpu.capability}"
    except ImportError as exc:
        torch_line = f"torch not recorded: {exc}"
    try:
        from hwprof.core.runtime_names import import_runtime

        capabilities = facts.openvino_capabilities()
        name = import_runtime("openvino").Core().get_property("CPU", "FULL_DEVICE_NAME")
        doc = {"OPTIMIZATION_CAPABILITIES": str(capabilities), "FULL_DEVICE_NAME": str(name)}
        (out / "openvino_facts.txt").write_text(repr(doc) + "\n")
        openvino_line = "OpenVINO CPU capabilities " + ", ".join(capabilities)
    except Exception as exc:  # any failure of the plugin is the fact: not recorded, said in the README
        openvino_line = f"OpenVINO not recorded: {type(exc).__name__}: {exc}"
    return torch_line, openvino_line


def readme(out: Path, facts: MachineFacts, lines: list[str]) -> None:
    commit = run("git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD").strip()
    model = next((x.split(":", 1)[1].strip() for x in facts.cpuinfo().splitlines() if x.startswith("model name")), "?")
    when = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    intro = (
        f"Recorded by `python scripts/record_host.py` (hwprof {commit}) on {when}: {model}. Every file is what this "
        "host answered; tests/test_recorded_hosts.py replays them (hwprof.core.host_facts.RecordedHost) and checks "
        "what hwprof says here against expected.json."
    )
    files = (
        "Files: cpuinfo.txt (/proc/cpuinfo), lscpu.txt, cpu_online.txt, uname.txt, id.txt (the user), paranoid.txt "
        "(kernel.perf_event_paranoid), powercap.txt (`ls -la /sys/class/powercap`) and sys/class/powercap (its zones, "
        "where there are any), event_source_devices.txt, event_source_detail.txt (each PMU's files, type and events), "
        "power_pmu_files.txt (the power and msr PMUs' events, format and cpumask) and sys/bus/event_source/devices "
        "(each PMU's type, cpumask, format/ and events/, as hwprof reads them), perf_version.txt (`perf --version`), "
        "perf_stat_cycles.txt (`perf stat -x , -e cycles,instructions true`: what hwprof asks to know whether the PMU "
        f"counts), perf_power.txt and perf_psys.txt (`perf stat -a -e power/EVENT/ sleep {ENERGY_SECONDS}`), "
        "torch_facts.json (torch's CPU capability), openvino_facts.txt (OpenVINO's CPU capabilities), nvidia.txt "
        "(/dev/nvidiactl, `nvidia-smi --query-gpu=name,driver_version`), expected.json (what hwprof says here)."
    )
    text = [
        f"# {out.name}",
        "",
        textwrap.fill(intro, 115),
        "",
        *[f"- {line}" for line in lines],
        "",
        textwrap.fill(files, 115),
    ]
    (out / "README.md").write_text("\n".join(text) + "\n")


def derive_sysfs(folder: Path) -> None:
    """A recording of the text files alone (shared/hosts/ before this script): its sys/bus/event_source/devices
    laid out from event_source_detail.txt (each PMU's `ls`, type, events) and power_pmu_files.txt (the files' text).
    Only what those hold is written: a PMU's type, and each file power_pmu_files.txt quotes."""
    root = folder / EVENT_SOURCE.relative_to("/")
    for block in read(folder / "event_source_detail.txt").split("== ")[1:]:
        path, *lines = block.splitlines()
        types = [i for i, line in enumerate(lines) if line.strip().isdigit()]
        if types:
            (root / Path(path).name).mkdir(parents=True, exist_ok=True)
            (root / Path(path).name / "type").write_text(lines[types[0]].strip() + "\n")
    for block in read(folder / "power_pmu_files.txt").split("== ")[1:]:
        path, _, text = block.partition("\n")
        target = root / Path(path).relative_to(EVENT_SOURCE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where to write the recording (tests/fixtures/hosts/NAME)")
    parser.add_argument(
        "--derive-sysfs", action="store_true", help="record nothing: lay out an older recording's sysfs copy"
    )
    args = parser.parse_args()
    folder: Path = args.folder
    if args.derive_sysfs:
        derive_sysfs(folder)
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    facts = MachineFacts()
    (folder / "cpuinfo.txt").write_text(facts.cpuinfo() + "\n")
    (folder / "lscpu.txt").write_text(run("lscpu"))
    (folder / "cpu_online.txt").write_text(read(Path("/sys/devices/system/cpu/online")))
    (folder / "uname.txt").write_text(run("uname", "-a"))
    (folder / "id.txt").write_text(run("id"))
    (folder / "paranoid.txt").write_text((facts.perf_event_paranoid() or "unreadable") + "\n")
    powercap(folder)
    events = event_sources(folder)
    perf = facts.perf_path()
    (folder / "perf_version.txt").write_text((facts.perf_version(perf) if perf else "perf: not found on PATH") + "\n")
    (folder / "perf_stat_cycles.txt").write_text(facts.perf_stat_cycles(perf) if perf else "perf: not found\n")
    energy(folder, events, perf)
    gpus = run("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader")
    present = "present" if facts.nvidia_driver() else "absent"
    (folder / "nvidia.txt").write_text(f"{NVIDIA_CTL}: {present}\n{gpus}")
    torch_line, openvino_line = runtimes(folder, facts)
    lines = [
        f"perf_event_paranoid {facts.perf_event_paranoid()}; perf: {perf or 'not on PATH'}",
        f"powercap: {'present' if POWERCAP.is_dir() else 'absent'}; power PMU events: {', '.join(events) or 'none'}",
        torch_line,
        openvino_line,
        f"NVIDIA driver: {present}",
    ]
    readme(folder, facts, lines)
    print(f"recorded this host into {folder}; now write {folder / 'expected.json'} (see this script's docstring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
