#!/bin/bash
# Issue 38's run-directory faults, each as a user meets it; prints what hwprof says and its exit status.
#   scripts/fault_repros.sh removed|signals|killed|readonly [HWPROF]
# HWPROF: the hwprof to run (default: the one on PATH), e.g. an older checkout's .venv/bin/hwprof for "before".
# removed: the run directory's parent deleted while the timing pass runs; signals: SIGINT/SIGTERM at delays
# from 0 to 1 s after `hwprof report` starts; killed: a collect killed with SIGKILL, then report and the next
# collect (the header, the 128 KiB reserve); readonly: `hwprof trace` on a read-only bind mount (root).
set -u
what=${1:?removed|signals|killed|readonly}
HW=${2:-hwprof}
FIXTURE=$(cd "$(dirname "$0")/../tests/fixtures/rundir_small" && pwd)
work=$(mktemp -d /tmp/hwprof-faults.XXXX)
SMALL=(--model yolov8n --imgsz 64 --warmup 1 --no-report --only timing)

case $what in
removed)
  mkdir -p "$work/parent"
  "$HW" collect "${SMALL[@]}" --iters 400 --out "$work/parent/run" >"$work/out.txt" 2>&1 &
  pid=$!
  until [ -s "$work/parent/run/passes/timing/markers.jsonl" ]; do sleep 0.05; done
  worker=$(cat "$work/parent/run/passes/timing/worker.pid")
  rm -rf "$work/parent"
  wait $pid; echo "exit $?"
  grep -v "━" "$work/out.txt"
  sleep 1; [ -d "/proc/$worker" ] && echo "the pass's worker $worker is still running" || echo "worker $worker stopped"
  ;;
signals)
  cp -r "$FIXTURE" "$work/run"
  # from Python, as a supervisor starts it: a job started with & in a script begins with SIGINT ignored
  python3 - "$HW" "$work/run" <<'PY'
import signal, subprocess, sys, time
for sig in (signal.SIGINT, signal.SIGTERM):
    for delay in (0, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0):
        p = subprocess.Popen([sys.argv[1], "report", sys.argv[2]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(delay)
        p.send_signal(sig)
        out = p.communicate()[0]
        last = (out.strip().splitlines() or [""])[-1][:80]
        print(f"{sig.name} at {delay} s: returncode {p.returncode}, traceback {'Traceback' in out}: {last}")
PY
  ;;
killed)
  "$HW" collect "${SMALL[@]}" --iters 400 --out "$work/run" >/dev/null 2>&1 &
  pid=$!
  until [ -s "$work/run/passes/timing/markers.jsonl" ]; do sleep 0.05; done
  worker=$(cat "$work/run/passes/timing/worker.pid")
  kill -9 $pid; wait $pid 2>/dev/null; kill -9 "$worker" 2>/dev/null; sleep 0.5
  "$HW" report "$work/run" 2>&1 | grep -E "^run |^warning" | head -3
  echo "after report: $(ls -a "$work/run" | grep -E 'reserve|lock' | tr '\n' ' ')"
  "$HW" collect "${SMALL[@]}" --iters 2 --out "$work/run" 2>&1 | tail -n 1
  echo "after the next collect: $(ls -a "$work/run" | grep -E 'reserve|lock' | tr '\n' ' ')"
  ;;
readonly)
  mkdir -p "$work/src" "$work/ro"; cp -r "$FIXTURE" "$work/src/run"; echo old >"$work/src/run/trace.pftrace"
  mount --bind "$work/src" "$work/ro" && mount -o remount,ro,bind "$work/ro" || exit 1
  "$HW" trace "$work/ro/run"; echo "exit $?"
  umount -l "$work/ro"
  ;;
esac
rm -rf "$work"
