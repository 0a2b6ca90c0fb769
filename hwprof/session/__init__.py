"""Running a collect: the plan, the passes' worker processes, stopping, finishing the run."""
