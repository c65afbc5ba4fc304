"""The cases seen by other tools: `asv_adapter.py` (ASV benchmarks), `pytest_plugin.py` (pytest-benchmark)."""
