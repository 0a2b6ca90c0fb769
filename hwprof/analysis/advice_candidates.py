"""Which changes to try for a run: each candidate tied to the finding that points to it (Finding.topic).

Pure: from the run's configuration, host ISA, findings and a few measured figures to a list of
Candidates. A candidate the host cannot run (no bf16 units, a runtime not installed) or that no
finding of this run points to is kept, marked not run with the reason, so the table says what
was considered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from hwprof.analysis.finding import Finding
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
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
GPU_BATCHES = (8, 32)
"""Batch sizes tried when the GPU waits for the CPU (the recorded H100 experiments' points)."""


@dataclass(frozen=True)
class Variant:
    """The RunConfig fields a variant sets (None: as in the advised run), applied with dataclasses.replace."""

    runtime: str | None = None
    precision: str | None = None
    channels_last: bool | None = None
    threads: int | None = None
    batch: int | None = None

    def overrides(self) -> dict[str, str | bool | int]:
        """The fields set, in their declared order: RunConfig's field name -> its value in the variant."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    def to_dict(self) -> dict[str, Any]:
        return dict(self.overrides())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Variant:
        return cls(**d)


@dataclass
class Candidate:
    key: str
    change: str
    how: str
    """collect options (starting with --), an environment assignment, or code."""
    topics: tuple[str, ...]
    """Finding topics that point to this change, most specific first."""
    variant: Variant = field(default_factory=Variant)
    """RunConfig fields the variant changes."""
    compile_mode: str = ""
    """torch.compile mode ("" for none)."""
    cuda_graph: bool = False
    env: dict[str, str] = field(default_factory=dict)
    """Environment of the variant's process (a change that needs a new process)."""
    finding: str = ""
    layers: tuple[int, ...] = ()
    """The layers its finding names: the row shows their times before and after whether they moved most or not."""
    blocked: str = ""
    """Why it is not run ("" when it runs)."""
    parts: tuple[str, ...] = ()
    """A combination (analysis/advice_combos.py): the single levers' keys it combines, measured first."""
    likely: str = ""
    """A combination: the host's units that make it the likely winner whatever its parts did."""

    @property
    def method(self) -> str:
        return PASS_LEVEL if self.env else PAIRED

    @property
    def per_image(self) -> bool:
        return self.variant.batch is not None

    @property
    def has_layers_pass(self) -> bool:
        """A layers pass of the variant gives per-layer times (not under Inductor or a CUDA graph)."""
        return not self.compile_mode and not self.cuda_graph

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "change": self.change,
            "how": self.how,
            "variant": self.variant.to_dict(),
            "compile_mode": self.compile_mode,
            "cuda_graph": self.cuda_graph,
            "env": self.env,
            "finding": self.finding,
            "layers": list(self.layers),
            "method": self.method,
            **({"parts": list(self.parts)} if self.parts else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Candidate:
        return cls(
            d["key"],
            d["change"],
            d["how"],
            (),
            Variant.from_dict(d.get("variant", {})),
            d.get("compile_mode", ""),
            bool(d.get("cuda_graph")),
            dict(d.get("env", {})),
            d.get("finding", ""),
            tuple(d.get("layers", ())),
        )


@dataclass
class RunFacts:
    """What the candidates depend on, read from the advised run."""

    runtime: str
    precision: str
    device: str
    channels_last: bool
    threads: int
    batch: int
    isa_flags: tuple[str, ...] | None
    """None: the run recorded no ISA flags."""
    cpus_busy: float | None = None
    """The forward's time-weighted CPUs busy (layers pass task-clock / wall)."""
    unavailable_runtimes: dict[str, str] = field(default_factory=dict)
    """Runtime name -> why it cannot run here."""
    malloc_libs: dict[str, str] = field(default_factory=dict)
    """Replacement malloc (hardware.malloc_libs.MALLOC_LIBS) -> its library's path here; "" or absent: none."""


def cpu_candidates(facts: RunFacts) -> list[Candidate]:
    """The single levers (their combinations: analysis/advice_combos.py)."""
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


def gpu_candidates(facts: RunFacts) -> list[Candidate]:
    out = [
        Candidate(
            "cuda-graph",
            "the forward captured once as a CUDA graph and replayed (no per-kernel launch from Python)",
            "code: g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): out = model(static_input); g.replay()",
            ("launch-bound", "small-launches"),
            cuda_graph=True,
        ),
        Candidate(
            "compile-reduce-overhead",
            "torch.compile mode 'reduce-overhead' (Inductor kernels replayed as CUDA graphs)",
            'code: model = torch.compile(model, mode="reduce-overhead")',
            ("launch-bound", "small-launches"),
            compile_mode="reduce-overhead",
        ),
    ]
    if facts.precision == "fp32":
        for precision in ("fp16", "bf16"):
            out.append(
                Candidate(
                    precision,
                    f"the model and input in {precision} (tensor-core math)",
                    f"--precision {precision}",
                    ("no-tensor-cores", "layout-transposes", "launch-bound"),
                    Variant(precision=precision),
                )
            )
    if not facts.channels_last:
        out.append(
            Candidate(
                "channels_last",
                "model and input in channels_last (NHWC): no cuDNN NCHW<->NHWC transposes",
                "--channels-last",
                ("layout-transposes",),
                Variant(channels_last=True),
            )
        )
    for batch in GPU_BATCHES:
        if batch > facts.batch:
            out.append(
                Candidate(
                    f"batch-{batch}",
                    f"batch {batch} instead of {facts.batch} (time per image): the GPU stops waiting for the CPU",
                    f"--batch {batch}",
                    ("launch-bound", "small-launches"),
                    Variant(batch=batch),
                )
            )
    return out


def candidates(facts: RunFacts, findings: Iterable[Finding]) -> list[Candidate]:
    """Every single-lever candidate for the run's device, tied to findings (tie_findings)."""
    return tie_findings(gpu_candidates(facts) if facts.device != "cpu" else cpu_candidates(facts), findings)


def tie_findings(cs: list[Candidate], findings: Iterable[Finding]) -> list[Candidate]:
    """Each candidate tied to the heaviest finding of its most specific topic; one that no finding points to is
    blocked with that reason."""
    by_topic: dict[str, Finding] = {}
    for f in sorted(findings, key=lambda f: -f.weight):
        if f.topic:
            by_topic.setdefault(f.topic, f)
    for c in cs:
        hit = next((by_topic[t] for t in c.topics if t in by_topic), None)
        if hit is not None:
            c.finding = hit.title
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
