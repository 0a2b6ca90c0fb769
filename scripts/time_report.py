"""How long the report of a run directory takes, in a fresh interpreter as `hwprof report` would.

    python scripts/time_report.py RUN_DIR [--repeats 3]

Times three variants, each in a new `python -P` process (imports included): the text report only,
the text report plus summary.json and layers.csv, and all of that plus the three PNG plots.
Prints the median wall time of each and its ratio to the 3 s target. Not a unit test: the
figures depend on the host and its load (the 1-min load average is printed beside them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 3.0
CODE = """
import sys
from rich.console import Console
from hwprof.session.finish import report_run as report
variant = sys.argv[2]
report(sys.argv[1], console=Console(file=open("/dev/null", "w"), width=100), write=variant != "none",
       plots=variant == "all")
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / args.run_dir.name
        shutil.copytree(args.run_dir, run_dir)
        print(f"run {args.run_dir} ({sum(1 for _ in run_dir.rglob('*'))} files); load {os.getloadavg()[0]:.2f}")
        for variant, label in (
            ("none", "text only"),
            ("files", "text + summary.json + layers.csv"),
            ("all", "text + files + 3 PNG plots"),
        ):
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-P", "-c", CODE, str(run_dir), variant], check=True)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            print(
                f"{label:<36} median {med:6.2f} s of {args.repeats} "
                f"(min {min(times):.2f}); {med / TARGET_S:.2f}x the {TARGET_S:.0f} s target"
            )
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
