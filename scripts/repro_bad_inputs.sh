#!/bin/bash
# The bad inputs of issue 38's "smaller ones", each run for real; one summary line per case (exit status, output
# lines, longest line, the last line cut to 150 characters, what was left behind).
#   bash scripts/repro_bad_inputs.sh [PYTHON]     (default: python3; takes about 3 minutes on a quiet 2-core host)
# Before/after: run it with the hwprof to compare on PYTHONPATH (e.g. a `git archive` of the older commit).
set -u
PY=${1:-python3}
WORK=$(mktemp -d /tmp/hwprof-bad-inputs.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
LONG=$("$PY" -c 'print("/x" + "a" * 4998)')
SMALL=(--model yolov8n --imgsz 64 --iters 2)

show() {  # show NAME OUTPUT_FILE STATUS [RUN_DIR]
    local lines longest last left=""
    lines=$(grep -c . "$2")
    longest=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$2")
    last=$(grep . "$2" | tail -1 | cut -c1-150)
    if [ -n "${4:-}" ] && [ -d "$4" ]; then
        left=" | run.json: $("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['status'])" "$4/run.json" \
            2>/dev/null || echo none); .tmp left: $(find "$4" -name '*.tmp' -printf '%f ' | head -c 200)"
    fi
    echo "$1: exit $3, $lines lines, longest $longest | $last$left"
}

collect() {  # collect NAME [VAR=VALUE...] -- ARGS: one hwprof collect into $WORK/NAME
    local name=$1 out="$WORK/$1"; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    env "${envs[@]}" COLUMNS=300 "$PY" -m hwprof collect "${SMALL[@]}" --out "$out" --no-report "$@" \
        > "$WORK/$name.log" 2>&1
    show "$name" "$WORK/$name.log" $? "$out"
}

for var in HWPROF_POWERCAP_ROOT HWPROF_VALGRIND HWPROF_EVENT_SOURCE_ROOT; do
    collect "$var-5000-chars" "$var=$LONG" -- --only timing,rapl
done
collect "HWPROF_POWERCAP_ROOT-newline" "HWPROF_POWERCAP_ROOT=/tmp
/sys" -- --only timing,rapl
collect "weights-directory" -- --only timing --weights /
collect "weights-dev-zero" -- --only timing --weights /dev/zero
mkdir -p "$WORK/imgs"
for i in $(seq -w 1 1000); do printf '\xff\xd8 not a jpeg' > "$WORK/imgs/broken$i.jpg"; done
collect "1000-unreadable-images" -- --only timing --images "$WORK/imgs"
(ulimit -f 512; collect "ulimit-f-512-pyspy-kineto" -- --only torch_profiler,pyspy)
grep "collector .* failed" "$WORK/ulimit-f-512-pyspy-kineto.log" | cut -c1-200
(ulimit -f 16; collect "ulimit-f-16-hwprof-itself" -- --only timing)
