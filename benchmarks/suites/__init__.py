"""Suites: what CI or a user runs to get kira's current figures (the pytest-benchmark files and their full-size runs)."""
