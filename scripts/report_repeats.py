"""The sentences of 8 words or more that a terminal report prints more than once (issue 68's measure: wrapped lines
joined, table rules removed, sentences split at . ; : ! ? and parentheses).

    COLUMNS=80 hwprof report RUN > report.txt && python scripts/report_repeats.py report.txt

Prints the report's line count and each repeated sentence with its count; exit 0 whatever it finds (a measure, not a
gate: tests/test_report_summary.py asserts none on the recorded fixture).
"""

from __future__ import annotations

import collections
import re
import sys

RULES = re.compile(r"[│┃┏┓┗┛┡┩━─┬┴┼╇╈┳┻╋└┘┌┐├┤]+")
SENTENCE = re.compile(r"(?<=[.;:!?])\s+|\s\(|\)\s")
WORDS = 8


def repeated_sentences(lines: list[str]) -> dict[str, int]:
    """Each sentence of WORDS words or more printed more than once -> how many times."""
    text = RULES.sub(" ", " ".join(" ".join(lines).split()))
    counted = collections.Counter(" ".join(p.split()) for p in SENTENCE.split(text) if len(p.split()) >= WORDS)
    return {s: n for s, n in counted.items() if n > 1}


def main(path: str) -> int:
    with open(path) as file:
        lines = file.read().splitlines()
    repeats = repeated_sentences(lines)
    print(f"{path}: {len(lines)} lines, {len(repeats)} sentences of {WORDS}+ words printed more than once")
    for sentence, n in sorted(repeats.items(), key=lambda kv: -kv[1]):
        print(f"  {n}x {sentence[:110]}")
    return 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="The sentences of 8+ words a terminal report prints twice or more.")
    parser.add_argument("report", help="a report saved as text (COLUMNS=80 hwprof report RUN > report.txt)")
    path = parser.parse_args().report
    try:
        sys.exit(main(path))
    except OSError as exc:
        sys.exit(f"report_repeats.py: {path}: {exc.strerror or exc}")
