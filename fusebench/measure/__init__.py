"""Measuring one (case, params, variant): correctness first, then time and counters.

`measure.py` (the procedure), `correctness.py` and `snapshot.py` (checking results, restoring
inputs), `timing.py` and `clocks.py` (timers, L2 flushing), `profiling.py` (kernel counts),
`bandwidth.py` (the machine's peak), `machine.py` (what it runs on), `stats.py` (median, IQR)
and `outcome.py` (what a measurement produced, and the metrics recorded).
"""

from fusebench.measure.measure import Settings, measure_variant, prepare_case

__all__ = ["Settings", "measure_variant", "prepare_case"]
