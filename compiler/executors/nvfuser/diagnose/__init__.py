"""Diagnostics for nvFuser fusions: standalone repro scripts, and the child process that profiles them."""
