#!/usr/bin/env bash
# Live GPU check of hwprof on a lent NVIDIA H100 (device tool), from the repository root:
#   run(command="bash scripts/gpu_check/run.sh", carry=[".whl"], timeout_s=420)
# Installs the carried wheels into /tmp/site (never torch/torchvision/nvidia-*: the image's 2.11.0+cu130 stays),
# runs hwprof from the checkout (PYTHONPATH), and writes under $OUT (7 files, flat):
#   log.txt doctor.txt collect.txt report.txt run.json r1.tar.gz pytest.txt
# Every step runs under `timeout`, capped by one deadline (LIMIT s from the start; the whole script < 6 min);
# TESTS_ONLY=1: set-up, the GPU facts and the tests only; SKIP_TESTS=1: no tests; COLLECT_ITERS="": the collect
# without --iters (the timing pass's stopping rule). A failed step never stops the next.
# Local dry run (no GPU, no install):
#   SKIP_INSTALL=1 PY=/path/to/python OUT=/tmp/devout bash scripts/gpu_check/run.sh
set -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/devout}
mkdir -p "$OUT"
PY=${PY:-python3}
SITE=${SITE:-/tmp/site}
RUN=${RUN:-/tmp/r1}
LIMIT=${DEVCHECK_LIMIT:-340}
T0=$SECONDS
RCS=()
MADE_LINK=0

left() { echo $((LIMIT - (SECONDS - T0))); }
# cap NOMINAL RESERVE: NOMINAL seconds, or what is left before the deadline less RESERVE (at least 5)
cap() {
    local n=$1 l
    l=$(($(left) - $2))
    ((l < n)) && n=$l
    ((n < 5)) && n=5
    echo "$n"
}
# step NAME TIMEOUT FILE TAIL CMD...: CMD under timeout, its output into FILE ("-": straight to the log), the
# last TAIL lines of FILE into the log; its exit status printed and kept
step() {
    local name=$1 t=$2 file=$3 tl=$4 s=$SECONDS rc
    shift 4
    echo
    echo "=== [$name] start +$((SECONDS - T0))s, timeout ${t}s: $*"
    if [[ $file == - ]]; then
        timeout -k 5 "$t" "$@" 2>&1
        rc=$?
    else
        timeout -k 5 "$t" "$@" >"$file" 2>&1
        rc=$?
        echo "--- last $tl lines of $file:"
        tail -n "$tl" "$file"
    fi
    echo "=== [$name] exit $rc after $((SECONDS - s))s$( ((rc == 124 || rc == 137)) && echo ' (TIMED OUT)')"
    RCS+=("$name=$rc")
    return 0
}

setup() {
    echo "=== host: $(hostname) $(uname -r), $(nproc) CPUs, python: $(command -v "$PY") ($("$PY" -V 2>&1))"
    echo "=== image versions of what hwprof needs (before install):"
    "$PY" - <<'EOF'
import importlib.metadata as md
for n in ("torch", "torchvision", "numpy", "protobuf", "typing_extensions", "rich", "psutil", "matplotlib", "jinja2",
          "PyYAML", "pillow", "requests", "httpx", "scipy", "opencv-python", "opencv-python-headless", "nvidia-ml-py",
          "onnx", "onnxruntime", "cloudpickle", "packaging", "pytest", "hypothesis", "pytest-xdist", "setuptools",
          "polars", "openvino", "ultralytics", "pydantic", "cffi"):
    try:
        v = md.version(n)
    except md.PackageNotFoundError:
        v = "-"
    print(f"  {n}=={v}")
EOF
    # the conditional wheels: only where the image's version is below what hwprof (or a carried wheel) needs
    COND=$("$PY" - <<'EOF'
import glob, os, sys
import importlib.metadata as md
from packaging.version import Version
need = {"protobuf": "6.31.1", "typing_extensions": "4.16.0", "rich": "14", "psutil": "7"}
for whl in sorted(glob.glob(".whl/cond/*.whl")):
    name = os.path.basename(whl).split("-")[0]
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    take = have is None or Version(have) < Version(need[name])
    print(f"  {name}: image {have}, needs >= {need[name]}: {'carried wheel installed' if take else 'image kept'}",
          file=sys.stderr)
    if take:
        print(whl)
EOF
)
    echo "=== installing into $SITE: $(ls .whl/*.whl | wc -l) wheels + conditional: ${COND:-none}"
    local cmd=("$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE"
        .whl/*.whl $COND)
    if [[ -n ${SKIP_INSTALL:-} ]]; then
        echo "SKIP_INSTALL: would run: ${cmd[*]}"
        mkdir -p "$SITE"
    else
        "${cmd[@]}" 2>&1 | grep -v "Running pip as the 'root' user"
        local prc=${PIPESTATUS[0]}
        echo "pip install exit $prc"
        RCS+=("install=$prc")
    fi
    # hwprof from the checkout, not installed. Two things an install gives that PYTHONPATH alone does not:
    # hwprof.collectors (pyproject's package-dir maps it to the top-level collectors/), and the distribution's
    # metadata (importlib.metadata.version("hwprof"): the model catalogue's cache name, doctor, --version).
    if [[ ! -e hwprof/collectors ]]; then
        ln -s ../collectors hwprof/collectors && MADE_LINK=1
    fi
    # (its Requires-Dist too: tests/test_gpu_collectors.py reads requires("hwprof"))
    SITE="$SITE" "$PY" - <<'EOF'
import os, pathlib, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
lines = ["Metadata-Version: 2.1", "Name: hwprof", f"Version: {p['version']}"]
lines += [f"Requires-Dist: {r}" for r in p["dependencies"]]
for extra, reqs in p.get("optional-dependencies", {}).items():
    lines += [f"Provides-Extra: {extra}"] + [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
d = pathlib.Path(os.environ["SITE"]) / f"hwprof-{p['version']}.dist-info"
d.mkdir(parents=True, exist_ok=True)
(d / "METADATA").write_text("\n".join(lines) + "\n")
EOF
    export PYTHONPATH="$SITE:$PWD${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH}"
    export PATH="$SITE/bin:$PATH" # py-spy's binary (the pyspy collector looks on PATH or beside python)
    export YOLO_OFFLINE=1 MPLBACKEND=Agg PYTHONUNBUFFERED=1 COLUMNS=160
    echo "PYTHONPATH=$PYTHONPATH"
    "$PY" -c "import hwprof, hwprof.cli.main, hwprof.collectors, importlib.metadata as m; print('hwprof', m.version('hwprof'), 'from', hwprof.__file__, '; collectors from', hwprof.collectors.__path__)"
    RCS+=("import=$?")
}

gpu_info() {
    step nvidia-smi 20 - 0 nvidia-smi -L
    step nvidia-smi-q 20 - 0 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    step torch-cuda 60 - 0 "$PY" -c '
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("available", torch.cuda.is_available(), "devices", torch.cuda.device_count())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(torch.cuda.get_device_name(0), "cc", f"{p.major}.{p.minor}", "SMs", p.multi_processor_count,
          "mem GiB", round(p.total_memory / 2**30, 1))
    x = torch.randn(4096, 4096, device="cuda"); torch.cuda.synchronize(); print("matmul ok", float((x @ x).sum()) != 0)
'
}

main() {
    trap cleanup EXIT # main runs in the pipeline's subshell: the link it made is removed when it ends
    echo "=== hwprof live GPU check, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), OUT=$OUT"
    setup
    gpu_info
    if [[ -z ${TESTS_ONLY:-} ]]; then
    # (b0) the zygote question on its own: fork after the zygote's imports, CUDA in the child
    step forkprobe "$(cap 60 200)" - 0 "$PY" scripts/gpu_check/forkprobe.py
    # (a) doctor for the GPU (falls back to the plain one where --device cuda is refused)
    step doctor "$(cap 45 190)" "$OUT/doctor.txt" 45 "$PY" -m hwprof doctor --device cuda
    if [[ ${RCS[-1]} != doctor=0 ]]; then
        step doctor-cpu "$(cap 40 180)" "$OUT/doctor-cpu.txt" 30 "$PY" -m hwprof doctor
        cat "$OUT/doctor-cpu.txt" >>"$OUT/doctor.txt" && rm -f "$OUT/doctor-cpu.txt"
    fi
    # (b) the collect with its default passes (timing+cuda_graph, layers+nvml, trace, gpu: gpu_kineto + peaks,
    # scalene; kernels needs perf, absent there); each pass at most 90 s
    rm -rf "$RUN"
    # shellcheck disable=SC2086  # COLLECT_ITERS: "--iters 5" by default; empty, the timing pass's stopping rule
    step collect "$(cap 210 75)" "$OUT/collect.txt" 70 "$PY" -m hwprof collect --model yolov8n --imgsz 640 \
        --device cuda ${COLLECT_ITERS---iters 5} --timeout 90 --out "$RUN"
    step summary 20 - 0 "$PY" scripts/gpu_check/summarize.py "$RUN"
    # (c) the report again, and the run directory's small files
    step report "$(cap 40 50)" "$OUT/report.txt" 0 "$PY" -m hwprof report "$RUN"
    echo "--- report, first 80 lines:"
    head -n 80 "$OUT/report.txt"
    if [[ -d $RUN ]]; then
        cp "$RUN/run.json" "$OUT/run.json" 2>/dev/null
        local base big
        base=$(basename "$RUN")
        big=$(cd "$(dirname "$RUN")" && find "$base" -type f -size +3M)
        echo "--- left out of r1.tar.gz (over 3 MiB):"
        (cd "$(dirname "$RUN")" && find "$base" -type f -size +3M -exec ls -la {} \;)
        tar -czf "$OUT/r1.tar.gz" -C "$(dirname "$RUN")" --exclude-from=<(printf '%s\n' $big) "$base"
        if (($(stat -c %s "$OUT/r1.tar.gz") > 15 * 1024 * 1024)); then
            big=$(cd "$(dirname "$RUN")" && find "$base" -type f -size +512k)
            tar -czf "$OUT/r1.tar.gz" -C "$(dirname "$RUN")" --exclude-from=<(printf '%s\n' $big) "$base"
            echo "r1.tar.gz over 15 MiB: remade without files over 512 KiB"
        fi
        ls -la "$OUT"
    fi
    fi
    [[ -n ${SKIP_TESTS:-} ]] && { echo "=== exit codes: ${RCS[*]}"; return 0; }
    # (d) the GPU tests (recordings, collectors, import, trace, advice, schema) and the CUDA-path driver tests
    step pytest "$(cap 150 8)" "$OUT/pytest.txt" 30 "$PY" -m pytest -q -p no:cacheprovider \
        tests/test_gpu_collectors.py tests/test_gpu_recordings.py tests/test_gpu_import_run.py \
        tests/test_gpu_trace.py tests/test_gpu_advice.py tests/test_gpu_claims.py tests/test_schema_gpu_files.py \
        "tests/test_program_driver.py::test_a_model_on_another_device_than_the_run_asked_is_one_line_with_the_fix" \
        "tests/test_program_driver.py::test_the_cuda_graph_figure_is_unavailable_for_a_program_with_the_reason"
    echo
    echo "=== exit codes: ${RCS[*]}"
    echo "=== total $((SECONDS - T0))s"
    local r
    for r in "${RCS[@]}"; do [[ ${r#*=} == 0 ]] || return 1; done
    return 0
}

cleanup() { ((MADE_LINK)) && rm -f hwprof/collectors; }
main "$@" 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
