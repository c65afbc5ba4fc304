"""Diagnostics for nvFuser fusions: standalone repro scripts."""
