"""`hwprof advise`: the candidate changes a run's findings point to, each run as a variant of the run's pipeline
on the same images and measured against the run's own configuration (paired where one process can hold both).

- candidates: hwprof.analysis.advice.candidates (pure, from the run's findings and host);
- paired_worker: one child process per candidate, baseline and variant side by side in ABBA blocks, with the
  output check against the fp32 reference; or one side alone for a change that needs a process of its own;
- runner: the children, a layers pass of each variant (a real `hwprof collect`), and advice.json.
"""
