"""The names of the files in a run directory (and a sweep's folder), in one place for the reader and the writer.

results/<run-id>/
  run.json                 what ran, on what, what was unavailable and why, stage latency
  layers.csv summary.json  the layer table joined with every per-layer metric; the report's figures
  advice.csv               the advice table (when the run was advised)
  roofline.png ...         the report's plots (PLOT_FILES)
  passes/<pass>/           per pass: markers.jsonl, model.json, result.json and each collector's files
  model/layer_errors.json  per-layer output error of a runtime against the reference
"""

from __future__ import annotations

RUN_JSON = "run.json"
SUMMARY_JSON = "summary.json"
LAYERS_CSV = "layers.csv"
ADVICE_CSV = "advice.csv"
ADVICE_JSON = "advice.json"
TRACE_NAME = "trace.pftrace"
PLOT_FILES = ("roofline.png", "layer_times.png", "stages.png", "kernels.png")
PASSES = "passes"
MARKERS = "markers.jsonl"
MODEL_JSON = "model.json"
RESULT_JSON = "result.json"
METRICS_SUFFIX = ".metrics.json"
RECORDS_SUFFIX = ".records.jsonl"

MODEL_DIR = "model"
LAYER_ERRORS_FILE = "layer_errors.json"

SWEEP_JSON = "sweep.json"
SWEEP_CSV = "sweep.csv"
SWEEP_ADVICE_CSV = "sweep_advice.csv"
SWEEP_PNG = "sweep.png"
