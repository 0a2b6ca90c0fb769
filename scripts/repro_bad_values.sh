#!/usr/bin/env bash
# Issue 38, "values are not checked, only types" and "markers out of order": damage copies of a finished run
# (tests/fixtures/rundir_small) and run report, trace and compare on each; prints each command's exit code and
# the lines that name the damage (or, on old code, the figure it printed). Usage: scripts/repro_bad_values.sh [WORKDIR]
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
hwprof="$root/.venv/bin/hwprof"
work=${1:-$(mktemp -d)}; mkdir -p "$work"
fixture="$root/tests/fixtures/rundir_small"
export COLUMNS=200
show() {  # command, run dir
  local out code
  out=$("$hwprof" "$@" 2>&1); code=$?
  echo "  $1 -> exit $code"
  if [ "$code" -ne 0 ]; then echo "$out" | grep -E "error" | head -2 | sed 's/^/    /'
  else echo "$out" | grep -E "forward|speed-up" | grep -vE "^\s*$" | head -3 | cut -c1-160 | sed 's/^/    /'; fi
}
for value in NaN Infinity 1e400 1000000000000000000000000000000 -5.0; do
  dir="$work/p50_$value"; rm -rf "$dir"; cp -r "$fixture" "$dir"
  # the forward stage's p50 (stages.forward and timing's summary) replaced as text: json reads NaN, Infinity, 1e400
  sed -i "s/\"p50_ms\": 35.2742315/\"p50_ms\": $value/" "$dir/run.json"
  echo "forward p50_ms = $value"
  show report "$dir"; show trace "$dir"; show compare "$fixture" "$dir"
done
dir="$work/markers_swapped"; rm -rf "$dir"; cp -r "$fixture" "$dir"
python3 - "$dir/passes/layers/markers.jsonl" <<'PY'
import json, sys
path = sys.argv[1]
lines = open(path).read().splitlines(keepends=True)
rows = [json.loads(line) for line in lines]
# the first measured model.0 end, moved before its begin
end = next(i for i, r in enumerate(rows) if r[0] == "layer" and r[1] == "E" and r[2] == "model.0" and not r[5])
begin = max(i for i in range(end) if rows[i][0] == "layer" and rows[i][1] == "B" and rows[i][2] == "model.0")
lines.insert(begin, lines.pop(end))
open(path, "w").write("".join(lines))
PY
echo "layers markers.jsonl: E model.0 moved before its B"
show report "$dir"; show trace "$dir"
