"""An advised run's rows re-made from its stored worker results and neighbour loads by today's
`advice_rows.measured_row`: whether each row is ranked, and why not, under the rules as they are now (to see what a
rule change does to a table already measured, without measuring again).

    python scripts/advice_rerow.py RUN_DIR

Reads RUN_DIR/advice.json (each row's key, method and recorded neighbours) and RUN_DIR/advise/<key>/*.json (the
workers' results); prints one line per measured row: key, method, forward ratio, ranked, and the reason it is not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hwprof.analysis.advice.candidates import Candidate
from hwprof.analysis.advice.rows import PROCESSES, measured_row
from hwprof.perf.neighbours import NeighbourLoad
from hwprof.rundir.advise_files import read_advise_result


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    run = Path(sys.argv[1])
    doc = json.loads((run / "advice.json").read_text())
    for stored in doc["rows"]:
        if not stored.get("forward"):
            continue
        folder = run / "advise" / stored["key"]
        names = ["paired"] if stored["forward"]["method"] == "paired" else list(PROCESSES)
        results = {name: read_advise_result(folder / f"{name}.json") for name in names}
        loads = {name: NeighbourLoad.from_dict(load) for name, load in stored.get("neighbours", {}).items()}
        candidate = Candidate(stored["key"], stored["change"], stored["how"], ())
        row = measured_row(candidate, results, [], loads)
        ratio = f"{row.forward.ratio:.2f}x" if row.forward is not None else "-"
        why = row.disturbed or ("" if row.ranked else row.status)
        print(f"{row.key:28s} {stored['forward']['method']:20s} {ratio:>7s} ranked={row.ranked!s:5s} {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
