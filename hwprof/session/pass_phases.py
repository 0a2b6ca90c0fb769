"""Where a pass's wall time went, from its worker's progress lines as the collect received them: the first
thing to know before paying a pass's start-up only once (issue 66).

A worker says "build" as it starts building its model, "waiting" where it waits for the previous pass to end
(hwprof.session.turn), "warmup" (done 0) before its first warm-up iteration,
"measure" (done = the warm-ups) once its collectors have started, and "measure" again after each measured (or
clean) iteration. The collect notes when the first line of each phase came and when the last "measure" did;
with the worker's launch, its exit and the end of the pass's reading, that gives six consecutive stretches (seven
with a wait). The times are the collect's, so each stretch includes the pipe's delay (milliseconds), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STRETCHES = (
    ("start_s", "launch", "build"),
    ("build_s", "build", "built"),
    ("wait_s", "waiting", "warmup"),
    ("warmup_s", "warmup", "measure"),
    ("measure_s", "measure", "measured"),
    ("finish_s", "measured", "exit"),
    ("read_s", "exit", "end"),
)
"""Each stretch: its name in run.json (passes.<name>.phases) and the two moments it lies between. start: the
worker forked from the zygote or started (a started one imports torch there); build: the model built, checked,
its model.json written, the collectors prepared; wait (a pass launched beside the previous pass's close,
hwprof.session.turn): until that pass had ended; warmup: the warm-up iterations; measure: the measured (and
clean) iterations; finish: the collectors closed and the worker's files written, up to its exit; read: the
collect reading the attached tools' output (perf script, py-spy's) and the worker's results."""


@dataclass
class PhaseClock:
    """The moments of one pass (monotonic seconds), as its progress lines came."""

    launched: float
    first: dict[str, float] = field(default_factory=dict)
    last_measure: float | None = None

    def saw(self, phase: str, at: float) -> None:
        if phase:
            self.first.setdefault(phase, at)
        if phase == "measure":
            self.last_measure = at

    def stretches(self, exited_at: float | None, ended_at: float) -> dict[str, float]:
        """Each stretch whose two moments are known (a worker that never reached a phase leaves its stretches
        out), in seconds, rounded to milliseconds."""
        waiting = self.first.get("waiting")
        moments = {
            "launch": self.launched,
            "build": self.first.get("build"),
            "built": waiting if waiting is not None else self.first.get("warmup"),
            "waiting": waiting,
            "warmup": self.first.get("warmup"),
            "measure": self.first.get("measure"),
            "measured": self.last_measure,
            "exit": exited_at,
            "end": ended_at,
        }
        out: dict[str, float] = {}
        for name, begin, end in STRETCHES:
            a, b = moments[begin], moments[end]
            if a is not None and b is not None and b >= a:
                out[name] = round(b - a, 3)
        return out
