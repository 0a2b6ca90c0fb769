"""Runs side by side and a sweep's table: Rich and Markdown views, counters, runtimes."""
