"""Which changes to try for a run: each candidate tied to the finding that points to it (Finding.topic).

Pure: from the run's configuration, host ISA, findings and a few measured figures to a list of
Candidates. A candidate the host cannot run (no bf16 units, a runtime not installed) or that no
finding of this run points to is kept, marked not run with the reason, so the table says what
was considered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hwprof.analysis.advice.candidate import Candidate, RunFacts, Variant
from hwprof.analysis.finding import Finding
from hwprof.analysis.gpu.candidates import gpu_candidates
from hwprof.hardware.malloc_libs import MALLOC_LIBS

OPENMP_SPIN_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
"""libgomp (torch's OpenMP on Linux wheels): idle threads sleep at once instead of spinning."""
GLIBC_KEEP_FREED = {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296"}
"""glibc's malloc keeps freed memory for the next forward instead of giving it back to the OS (which faults and
zeroes it again). mmap_threshold cannot do it: mallopt documents a 32 MiB cap (DEFAULT_MMAP_THRESHOLD_MAX on
64-bit), below yolov7's 52 MB layer-0 output at 640. mmap_max=0 makes malloc never mmap, so large blocks come
from the heap, and a 4 GiB trim threshold keeps the heap's free top. scripts/malloc_faults.py (glibc 2.36, a
52 MB and an 8 MB block allocated, filled and freed per round): 13,364 faults a round by default, 15,329 at a
32 MiB threshold, 0 with these two."""
KEEP_FREED_ENV = {
    "jemalloc": {"MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
    "tcmalloc": {"TCMALLOC_RELEASE_RATE": "0"},
}
"""Each replacement malloc's setting that keeps freed pages (same script): jemalloc 5.3 purges blocks over
8 MiB at once by default (15,362 faults a round; also with dirty_decay_ms:30000), 0 with decay off; tcmalloc
2.10 gave 333 a round at its default release rate, 0 at rate 0."""
BF16_UNITS = ("avx512_bf16", "amx_bf16")
INT8_UNITS = ("avx512_vnni", "avx_vnni", "amx_int8")
NO_FINDING = "no finding of this run points to it"


def cpu_candidates(facts: RunFacts) -> list[Candidate]:
    """The single levers (their combinations: analysis/advice/combos.py)."""
    return [
        *_torch_candidates(facts),
        *_thread_candidates(facts),
        *_runtime_candidates(facts),
        *_precision_candidates(facts),
        *_openmp_candidates(facts),
        *allocator_candidates(facts),
    ]


def _torch_candidates(facts: RunFacts) -> list[Candidate]:
    """channels_last and torch.compile, for a torch run."""
    if facts.runtime != "torch":
        return []
    out: list[Candidate] = []
    if not facts.channels_last:
        out.append(
            Candidate(
                "channels_last",
                "model and input in channels_last (NHWC): oneDNN's native layout, no reorders per conv",
                "--channels-last",
                ("reference-conv", "below-roof", "data-movement", "memory-bound", "efficiency"),
                Variant(channels_last=True),
            )
        )
    out.append(
        Candidate(
            "compile",
            "torch.compile (Inductor, mode 'default'): fuses elementwise and data-movement layers",
            'code: model = torch.compile(model, mode="default")',
            ("data-movement", "python-overhead", "memory-bound", "below-roof", "efficiency"),
            compile_mode="default",
        )
    )
    return out


def _thread_candidates(facts: RunFacts) -> list[Candidate]:
    return [
        Candidate(
            f"threads-{n}",
            f"{n} intra-op thread{'s' if n > 1 else ''} instead of {facts.threads}",
            f"--threads {n}",
            ("threads-idle", "openmp-wait", "threads-low"),
            Variant(threads=n),
        )
        for n in thread_counts(facts)
    ]


def _runtime_candidates(facts: RunFacts) -> list[Candidate]:
    """The other runtimes, in fp32 on the exported model."""
    return [
        Candidate(
            runtime,
            f"{'ONNX Runtime' if runtime == 'onnxruntime' else 'OpenVINO'} in fp32 on the exported model",
            f"--runtime {runtime}",
            ("efficiency", "python-overhead", "below-roof"),
            Variant(runtime=runtime, precision="fp32"),
            blocked=facts.unavailable_runtimes.get(runtime, ""),
        )
        for runtime in ("onnxruntime", "openvino")
        if facts.runtime != runtime
    ]


def _precision_candidates(facts: RunFacts) -> list[Candidate]:
    """bf16 (a torch fp32 run) and int8 (an fp32 run), blocked where the host lacks the units."""
    out: list[Candidate] = []
    if facts.runtime == "torch" and facts.precision == "fp32":
        out.append(
            Candidate(
                "bf16",
                "bf16 autocast (convolutions and matmuls in bf16)",
                "--precision bf16",
                ("efficiency", "below-roof"),
                Variant(precision="bf16"),
                blocked=missing_units(facts, BF16_UNITS, "bf16"),
            )
        )
    if facts.precision == "fp32":
        out.append(
            Candidate(
                "int8",
                "ONNX Runtime int8 (dynamic quantization of the exported model)",
                "--runtime onnxruntime --precision int8",
                ("efficiency", "below-roof"),
                Variant(runtime="onnxruntime", precision="int8"),
                blocked=missing_units(facts, INT8_UNITS, "int8") or facts.unavailable_runtimes.get("onnxruntime", ""),
            )
        )
    return out


def _openmp_candidates(facts: RunFacts) -> list[Candidate]:
    if facts.threads <= 1:
        return []
    return [
        Candidate(
            "omp-passive",
            "OpenMP threads sleep when idle instead of spinning (libgomp OMP_WAIT_POLICY=PASSIVE)",
            "OMP_WAIT_POLICY=PASSIVE hwprof collect ...",
            ("openmp-wait",),
            env=dict(OPENMP_SPIN_ENV),
        )
    ]


def allocator_candidates(facts: RunFacts) -> list[Candidate]:
    """Mallocs that keep freed memory, against page faults: glibc's own tunables (nothing to install), then
    jemalloc and tcmalloc through LD_PRELOAD, each not run with its install command where its library is missing."""
    out = [
        Candidate(
            "malloc-keep",
            "glibc's malloc keeps freed memory (never mmap, no trim): activations reuse pages, no faults",
            f"GLIBC_TUNABLES={GLIBC_KEEP_FREED['GLIBC_TUNABLES']} hwprof collect ...",
            ("kernel-faults",),
            env=dict(GLIBC_KEEP_FREED),
        )
    ]
    for lib in MALLOC_LIBS:
        path = facts.malloc_libs.get(lib.name, "")
        env = {"LD_PRELOAD": path or lib.sonames[0], **KEEP_FREED_ENV.get(lib.name, {})}
        out.append(
            Candidate(
                lib.name,
                f"{lib.name} instead of glibc's malloc (LD_PRELOAD), freed pages kept",
                " ".join(f"{k}={v}" for k, v in env.items()) + " hwprof collect ...",
                ("kernel-faults",),
                env=env,
                blocked=""
                if path
                else f"{lib.name} is not installed ({', '.join(lib.sonames)} not found); fix: {lib.install}",
            )
        )
    return out


def thread_counts(facts: RunFacts) -> list[int]:
    """A small set around what the forward keeps busy: its CPUs busy rounded, and half the threads."""
    if facts.threads <= 1:
        return []
    wanted = {max(1, facts.threads // 2)}
    if facts.cpus_busy is not None:
        wanted.add(max(1, min(facts.threads, round(facts.cpus_busy))))
    return sorted(n for n in wanted if n != facts.threads)


def missing_units(facts: RunFacts, units: Sequence[str], what: str) -> str:
    if facts.isa_flags is None:
        return f"the run recorded no ISA flags, so whether this host has {what} units is unknown"
    if any(u in facts.isa_flags for u in units):
        return ""
    return (
        f"this host has no {what} units ({' or '.join(u.upper() for u in units)} not in /proc/cpuinfo): "
        f"{what} would be emulated, slower than fp32"
    )


def candidates(facts: RunFacts, findings: Iterable[Finding]) -> list[Candidate]:
    """Every single-lever candidate for the run's device, tied to findings (tie_findings)."""
    return tie_findings(cpu_candidates(facts) if facts.device == "cpu" else gpu_candidates(facts), findings)


def tie_findings(cs: list[Candidate], findings: Iterable[Finding]) -> list[Candidate]:
    """Each candidate tied to the heaviest finding of its most specific topic; one that no finding points to is
    blocked with that reason."""
    by_topic: dict[str, Finding] = {}
    for f in sorted(findings, key=lambda f: (bool(f.unconfirmed), -f.weight)):  # a measured fact first
        if f.topic:
            by_topic.setdefault(f.topic, f)
    for c in cs:
        hit = next((by_topic[t] for t in c.topics if t in by_topic), None)
        if hit is not None:
            c.finding = f"unconfirmed: {hit.title} ({hit.unconfirmed})" if hit.unconfirmed else hit.title
            c.layers = hit.layers
        elif not c.blocked:
            c.blocked = f"{NO_FINDING} (it answers: {', '.join(c.topics)})"
    return cs


def selected(cs: list[Candidate], keys: Sequence[str]) -> list[Candidate]:
    """`advise --only KEYS`: only these candidates, each run even where no finding of the run points to it (to
    measure a change on a run whose findings do not ask for it); one the host cannot run stays not run."""
    known = [c.key for c in cs]
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ValueError(
            f"--only {','.join(unknown)}: no such candidate for this run; its candidates are {', '.join(known)}"
        )
    out = [c for c in cs if c.key in keys]
    for c in out:
        if c.blocked.startswith(NO_FINDING):
            c.blocked = ""
            c.finding = f"none: asked for with --only ({NO_FINDING}; it answers {', '.join(c.topics)})"
    return out
