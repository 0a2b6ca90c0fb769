#!/usr/bin/env bash
# The README's second command and CI's (.ci/run runs exactly this): everything the suite needs on a bare Debian
# machine, then the suite. Python 3.11 with pip is the one thing it assumes; as root or with sudo, it installs
# the system tools whose collectors the tests run for real (Linux perf, valgrind >= 3.23, Chromium for the
# browser tests) and tox, then runs `tox` (scripts/run_tests.py: the phases, per-test durations kept under
# .tox/durations). Arguments go to tox: `bash scripts/suite.sh -- test_cli.py` runs one module.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
if ! command -v perf >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq linux-perf >/dev/null
    fi
    command -v perf >/dev/null 2>&1 || { echo "perf is missing and could not be installed (Debian: apt-get install linux-perf)" >&2; exit 1; }
fi
# Chromium opens report.html in the browser tests (tests/test_report_html.py): headless, no network.
if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
    fi
    command -v chromium >/dev/null 2>&1 || { echo "chromium is missing and could not be installed (Debian: apt-get install chromium)" >&2; exit 1; }
fi
# valgrind >= 3.23 for the callgrind counters pass (Debian 12's 3.19 is too slow): its tests run it for real.
bash scripts/install_valgrind.sh
command -v tox >/dev/null 2>&1 || python3 -m pip install --quiet "tox>=4"
echo "suite.sh: system tools ready after $(( $(date +%s) - started )) s"
status=0
tox "$@" || status=$?
echo "suite.sh: exit $status after $(( $(date +%s) - started )) s in all"
exit "$status"
