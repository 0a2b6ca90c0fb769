#!/usr/bin/env bash
# The README's second command and CI's (.ci/run runs exactly this): everything the suite needs on a bare Debian
# machine, then the suite. Python 3.11 with pip is the one thing it assumes; as root or with sudo, it installs
# the system tools whose collectors the tests run for real (Linux perf, valgrind >= 3.23, Chromium for the
# browser tests) and tox with tox-uv, then runs `tox` (scripts/run_tests.py: the phases, per-test durations kept under
# .tox/durations). Arguments go to tox: `bash scripts/suite.sh -- test_cli.py` runs one module.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
# binutils' c++filt demangles the kernels pass's symbols after `perf script --no-demangle` (without it, perf
# demangles every symbol of libtorch_cpu: 2-3 s more per kernels pass)
if ! command -v perf >/dev/null 2>&1 || ! command -v c++filt >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq linux-perf binutils >/dev/null
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
# tox with its uv plugin, in a venv of the suite's own (.venv-suite): uv builds tox's test env in about 15 s where
# pip took 100-120 s. uv reads no pip configuration: scripts/uv_env.py hands it pip's wheel sources.
if [ ! -x .venv-suite/bin/tox ]; then
    python3 -m venv .venv-suite && .venv-suite/bin/python -m pip install --quiet "tox>=4.20" "tox-uv>=1.20"
fi
eval "$(python3 scripts/uv_env.py)"
echo "suite.sh: system tools ready after $(( $(date +%s) - started )) s"
status=0
.venv-suite/bin/tox "$@" || status=$?
echo "suite.sh: exit $status after $(( $(date +%s) - started )) s in all"
exit "$status"
