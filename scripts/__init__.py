"""Standalone scripts (not suites): run from the repository root as `python -m scripts.<name>`."""
