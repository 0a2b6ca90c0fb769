"""Sweeps: one child `hwprof collect` per point (locally or as a Ray task), whose run directories become one
table.
"""
