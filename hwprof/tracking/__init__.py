"""Runs kept by a team: each collect, sweep and advise logged to an experiment tracker (MLflow)."""
