"""The candidates of `hwprof advise` on a user's program's run: the changes that can be made from outside its code.

A program's own code is not hwprof's to change, so its advice is what its process's environment and hwprof's
program driver (which already wraps the found model's call) can change:
- the intra-op thread count (OMP_NUM_THREADS, and torch.set_num_threads before the model's first call),
  OMP_WAIT_POLICY, and the malloc tunables or a replacement allocator: environment changes, each a run of the
  program of its own (a pass-level estimate: baseline, variant, baseline);
- channels_last (the found model and its input converted at its call), bf16 autocast around the model's call
  (where the host has bf16 units), and torch.compile of the found model: applied by the driver inside the
  program, the original and the changed model alternating over the program's own calls in ABBA blocks (paired).

Every candidate runs: their list is short, and unlike the built-in pipeline's (whose runtimes and precisions need
a finding to be worth their export), none costs more than a run of the program; a finding that points to one is
named in its row. A change that cannot be applied from outside the code is not run, with why (a TorchScript
model cannot be compiled; a model on a GPU; no model found).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from hwprof.analysis.advice.candidate import Candidate, RunFacts, Variant
from hwprof.analysis.advice.candidates import BF16_UNITS, OPENMP_SPIN_ENV, allocator_candidates, thread_counts
from hwprof.analysis.finding import Finding
from hwprof.rundir.reader import RunData

COLLECT_TAIL = "hwprof collect ..."
"""How the built-in allocator candidates end their `how`: a program's rows name the program's command instead."""
NO_FINDING_PROGRAM = "no finding of this run points to it (measured: a change the program allows from outside its code)"
THREADS_ENV = "OMP_NUM_THREADS"


@dataclass
class ProgramFacts:
    """What a program's candidates depend on, beside the run's (RunFacts): what the passes found of its model."""

    run: RunFacts
    argv: list[str]
    """The program's command as the run recorded it (script or -m module, then its arguments)."""
    model: str | None = None
    """How the program names its model (None: no model was found)."""
    scripted: bool = False
    """The model is a TorchScript module."""
    no_model: str | None = None
    """Why no model was measured (the pass's line), or None."""

    @property
    def command(self) -> str:
        return "python " + shlex.join(self.argv)


def program_facts(data: RunData, run: RunFacts) -> ProgramFacts:
    """The program's facts from its run: its command (config.json) and what its passes found of its model."""
    program = data.doc.config.program
    assert program is not None, "not a program's run"
    outcomes = [p.program for p in data.doc.passes.values() if p.program is not None]
    found = next((o for o in outcomes if o.model), None)
    no_model = next((o.no_model for o in outcomes if o.no_model), None)
    return ProgramFacts(
        run,
        list(program.argv or []),
        found.model if found is not None else None,
        bool(found.scripted) if found is not None else False,
        no_model if found is None else None,
    )


def program_candidates(facts: ProgramFacts, findings: Iterable[Finding] = ()) -> list[Candidate]:
    """The program's candidates, in the order of the table: environment changes, then those made at its model's call."""
    out = [*_thread_candidates(facts), *_openmp_candidates(facts), *_allocator_candidates(facts)]
    out += _model_candidates(facts)
    blocked = _blocked_all(facts)
    by_topic: dict[str, Finding] = {}
    for f in sorted(findings, key=lambda f: -f.weight):
        if f.topic:
            by_topic.setdefault(f.topic, f)
    for c in out:
        hit = next((by_topic[t] for t in c.topics if t in by_topic), None)
        c.finding, c.layers = (hit.title, hit.layers) if hit is not None else (NO_FINDING_PROGRAM, ())
        if blocked:
            c.blocked = blocked
    return out


def _blocked_all(facts: ProgramFacts) -> str:
    """Why no candidate can run (no model, a model on a GPU), or ""."""
    if facts.no_model:
        return f"no model was measured in the program ({facts.no_model}): nothing to compare a change on"
    if facts.run.device != "cpu":
        return (
            f"advice for a program whose model runs on {facts.run.device} is not built: its candidates are the CPU's "
            "(threads, OpenMP, malloc, layout, bf16, compile); run the built-in pipeline's advise for the GPU's"
        )
    return ""


def _thread_candidates(facts: ProgramFacts) -> list[Candidate]:
    run = facts.run
    return [
        Candidate(
            f"threads-{n}",
            f"{n} intra-op thread{'s' if n > 1 else ''} instead of {run.threads} (OMP_NUM_THREADS, and "
            "torch.set_num_threads before the model's first call)",
            f"{THREADS_ENV}={n} {facts.command} (or torch.set_num_threads({n}) in the program)",
            ("threads-idle", "openmp-wait", "threads-low"),
            Variant(threads=n),
            env={THREADS_ENV: str(n)},
        )
        for n in thread_counts(run)
    ]


def _openmp_candidates(facts: ProgramFacts) -> list[Candidate]:
    if facts.run.threads <= 1:
        return []
    ((name, value),) = OPENMP_SPIN_ENV.items()
    return [
        Candidate(
            "omp-passive",
            f"OpenMP threads sleep when idle instead of spinning (libgomp {name}={value})",
            f"{name}={value} {facts.command}",
            ("openmp-wait",),
            env=dict(OPENMP_SPIN_ENV),
        )
    ]


def _allocator_candidates(facts: ProgramFacts) -> list[Candidate]:
    """The built-in pipeline's allocator candidates (the same environments), naming the program's command."""
    out = allocator_candidates(facts.run)
    for c in out:
        c.how = c.how.replace(COLLECT_TAIL, facts.command)
    return out


def _model_candidates(facts: ProgramFacts) -> list[Candidate]:
    """channels_last, bf16 autocast and torch.compile, applied by hwprof's driver at the found model's call."""
    model = facts.model or "model"
    units = facts.run.isa_flags
    if units is None:
        no_bf16 = "the run recorded no ISA flags, so whether this host has bf16 units is unknown"
    elif not any(u in units for u in BF16_UNITS):
        names = " or ".join(u.upper() for u in BF16_UNITS)
        no_bf16 = f"this host has no bf16 units ({names} not in /proc/cpuinfo): autocast would run bf16 emulated"
    else:
        no_bf16 = ""
    return [
        Candidate(
            "channels_last",
            f"{model} and its input in channels_last (NHWC), converted at its call: oneDNN's native layout",
            f"code: {model} = {model}.to(memory_format=torch.channels_last); "
            "x = x.contiguous(memory_format=torch.channels_last)",
            ("reference-conv", "below-roof", "data-movement", "memory-bound", "efficiency"),
            Variant(channels_last=True),
        ),
        Candidate(
            "bf16",
            f"bf16 autocast around {model}'s call (convolutions and matmuls in bf16; its output back in fp32)",
            f"code: with torch.autocast('cpu', dtype=torch.bfloat16): out = {model}(x)",
            ("efficiency", "below-roof"),
            Variant(precision="bf16"),
            blocked=no_bf16,
        ),
        Candidate(
            "compile",
            f"torch.compile of {model} (Inductor, mode 'default'): fuses elementwise and data-movement layers",
            f'code: {model} = torch.compile({model}, mode="default")',
            ("data-movement", "python-overhead", "memory-bound", "below-roof", "efficiency"),
            compile_mode="default",
            blocked="the model is a TorchScript module (torch.jit), which torch.compile does not take; fix: run the "
            "program with its eager model (e.g. detect.py --no-trace)"
            if facts.scripted
            else "",
        ),
    ]
