"""The performance gate of `hwprof compare --fail-above`: its inputs, verdicts and paired measure."""
