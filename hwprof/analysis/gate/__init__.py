"""The performance gate of `hwprof compare --fail-above`: its inputs, its judgement of two runs, its verdicts and its
paired measure."""
