"""The names of the files in a run directory (and a sweep's folder), in one place for the reader and the writer.

results/<run-id>/
  run.json                 what ran, on what, what was unavailable and why, stage latency
  layers.csv summary.json  the layer table joined with every per-layer metric; the report's figures
  advice.csv               the advice table (when the run was advised)
  roofline.png ...         the report's plots (PLOT_FILES)
  report.html              the report as one self-contained page (the plots embedded)
  config.json images.json  the inputs every pass reads (written by the session before the first pass)
  passes/<pass>/           per pass: markers.jsonl, model.json, result.json, worker.log, worker.pid,
                           command.json and each collector's files
  model/layer_errors.json  per-layer output error of a runtime against the reference
"""

from __future__ import annotations

RUN_JSON = "run.json"
SUMMARY_JSON = "summary.json"
LAYERS_CSV = "layers.csv"
ADVICE_CSV = "advice.csv"
ADVICE_JSON = "advice.json"
TRACE_NAME = "trace.pftrace"
REPORT_HTML = "report.html"
PLOT_FILES = ("roofline.png", "layer_times.png", "stages.png", "kernels.png", "memory.png")
PASSES = "passes"
MARKERS = "markers.jsonl"
MODEL_JSON = "model.json"
RESULT_JSON = "result.json"
METRICS_SUFFIX = ".metrics.json"
RECORDS_SUFFIX = ".records.jsonl"
CONFIG_JSON = "config.json"
IMAGES_JSON = "images.json"
WORKER_LOG = "worker.log"
"""The worker's stderr (its log; the last `hwprof-error:` line says why it failed)."""
WORKER_PID = "worker.pid"
"""The process a stop signal goes to when the worker runs under a launcher (Scalene)."""
PROGRAM_CHILDREN = "children"
"""In a program's pass: the records of its child processes that called torch modules (hwprof.program.child_watch)."""
COMMAND_JSON = "command.json"
"""The pass's command line, as the collectors wrapped it."""

MODEL_DIR = "model"
LAYER_ERRORS_FILE = "layer_errors.json"

SWEEP_JSON = "sweep.json"
SWEEP_CSV = "sweep.csv"
SWEEP_ADVICE_CSV = "sweep_advice.csv"
SWEEP_PNG = "sweep.png"
SWEEP_HTML = "sweep.html"
"""The sweep's tables and plot as one self-contained page."""
SWEEP_TRANSFER_JSON = "ray_transfer.json"
"""A cluster sweep's record of what moving each point's run directory back cost."""
