"""The run directory: its one reader (RunData), its one writer, and its lock."""
