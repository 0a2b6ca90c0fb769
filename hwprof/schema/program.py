"""What a run of the user's own program records: its command (config.json's and run.json's `config.program`) and,
per pass, what the driver found and how the program ended (result.json's `program`, run.json's
`passes.<pass>.program`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.schema.bounds import Count, Share
from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class ProgramDoc(Record):
    """The program as the user ran it (hwprof.core.program_spec.ProgramSpec as written)."""

    argv: list[str] | None = None
    """Its sys.argv: [script, args...], or ["-m", module, args...]."""
    cwd: str | None = None
    model_path: str | None = None
    """--program-model, when the user named the module."""
    end: str | None = None
    """"stop": ended cleanly after the measured calls; "run": left to run to its own end."""
    stages: list[str] | None = None
    """--stage NAME=module:function options."""
    stdin: str | None = None
    """--program-stdin: the file given to the program as its stdin (absolute); absent: /dev/null."""
    attached: int | None = None
    """`hwprof attach PID`: the running service's PID (its passes were windows of its calls); absent: hwprof ran it."""
    outside: bool | None = None
    """`hwprof attach --no-agent`: the service was sampled from outside, whole-process; absent: not."""


@dataclass(kw_only=True)
class ProgramOutcome(Record):
    """One pass of the program: the module taken as the model and why, the calls seen, how the program ended."""

    model: str | None = None
    """The module as the program names it ("model", "detector.model"), or its class where no name reaches it."""
    model_class: str | None = None
    model_at: str | None = None
    """file:line of the program's own code whose frame named the model at the call that chose it (the line running
    there: its call of the model, or of the module around it); absent in older runs."""
    outer_call: str | None = None
    """The module whose call by the program held the model's calls, as "name (Class) at file:line", where the model
    was called inside another module's call (a wrapper's) and one such call was timed; absent otherwise."""
    outer_share: Share | None = None
    """The model's forward time as a share of that call's (below hwprof.program.whole_model.SMALL_SHARE the run is
    refused: the module measured is a part, not the model)."""
    why: str | None = None
    """Why this module was taken (the outermost module called repeatedly, or --program-model)."""
    layers_from: str | None = None
    """Where its layers are: "model.model" (a YOLO model's layer list, named model.i as hwprof's own runs), or
    "children" (its top-level children)."""
    layers: Count | None = None
    scripted: bool | None = None
    """A TorchScript module (torch.jit.trace or script): its children run inside TorchScript, no layer markers."""
    calls: Count = 0
    """Calls of the model the pass saw: the sum of the five kinds below."""
    before_calls: Count | None = None
    """Calls before the model was chosen, the choosing one included (unmarked; absent in older runs)."""
    warmup_calls: Count = 0
    measured_calls: Count = 0
    clean_calls: Count = 0
    after_calls: Count | None = None
    """Calls after the measured ones (--program-end run), unmarked."""
    traced_calls: Count | None = None
    """Calls made inside torch.jit.trace (tracing and checking the trace), unmarked."""
    other_roots: dict[str, Count] = field(default_factory=dict)
    """Other modules the program called at the outermost level, and how often (not the model)."""
    other_model_stages: dict[str, str] = field(default_factory=dict)
    """Stage name -> the other root module it times ("refiner" -> "refiner (Sequential)"): from the warm-up's end
    on, each other module the program called at the outermost level is a stage of its own, and its calls in
    other_roots are its true count (absent in older runs, whose other_roots stopped counting at the warm-up's end)."""
    model_thread: str | None = None
    """The thread whose calls of the model were measured, where it is not the main thread (its name)."""
    other_thread_calls: dict[str, Count] = field(default_factory=dict)
    """Calls of the model from threads other than the measured calls' (by name): unmarked, not measured."""
    stopped_threads: list[str] = field(default_factory=list)
    """Threads other than the main one that hwprof's stop ended (its ProgramStop raised in them, and then in the
    main thread: the whole program stopped)."""
    ended: str | None = None
    """"stopped after the measured calls", "ran to its end", "ended after M of its N measured calls", "ended before
    the measured calls" (none made), "failed", "interrupted", "called no torch module"."""
    exit_code: int | None = None
    """The program's own SystemExit code, where it called sys.exit."""
    error: str | None = None
    """The program's exception (its traceback is in the pass's worker.log)."""
    no_model: str | None = None
    """Why no model was measured (the program called no torch module, or none more than once), in one line."""
    whole_process: bool | None = None
    """The pass profiled the program's whole run as one span ("program"), with its whole-process collectors only
    (an earlier pass found no model)."""
    stages_wrapped: list[str] = field(default_factory=list)
    """Functions timed as stages in this pass (known by name or --stage), as NAME=module:function."""
    stages_unmatched: list[str] = field(default_factory=list)
    """--stage functions never wrapped (their module never imported, no such function); the notes say why."""
    stage_calls: dict[str, Count] = field(default_factory=dict)
    """Calls of each wrapped function that was called (every thread, warm-up and unmeasured calls included)."""
    notes: list[str] = field(default_factory=list)
    torch_threads: dict[str, Count] = field(default_factory=dict)
    """Measured calls per torch thread count ("1": 10, "2": 10): torch.get_num_threads() at each call, which the
    program may set itself, once or call by call (hwprof set --threads before it started); empty in older runs."""
    grad_calls: Count | None = None
    """Measured calls that ran with grad mode on (no torch.no_grad or inference_mode around them): their forwards
    recorded autograd graphs, slower than an inference's; absent in older runs."""
    inference_mode_calls: Count | None = None
    """Measured calls that ran inside torch.inference_mode; absent in older runs."""
