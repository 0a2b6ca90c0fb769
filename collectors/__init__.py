"""Collectors: one module per measurement source; see base.py for the interface."""
