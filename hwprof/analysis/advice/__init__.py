"""The advice table and its candidates: what `hwprof advise` runs, how its rows are measured and ranked."""
