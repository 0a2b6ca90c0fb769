"""The advice table rendered: Rich, and its CSV/JSON export."""
