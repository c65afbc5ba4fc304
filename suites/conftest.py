"""`pytest suites/ --benchmark-only` runs the cases as pytest-benchmark tests (fusebench/integrations/pytest_plugin.py).

Loaded only when pytest is pointed at this folder: the project's own tests (testpaths = tests)
never collect benchmarks.
"""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any, pluginmanager: Any) -> None:
    """Registers the plugin unless `-p fusebench.integrations.pytest_plugin` already did."""
    if not pluginmanager.has_plugin("fusebench.integrations.pytest_plugin"):
        pluginmanager.import_plugin("fusebench.integrations.pytest_plugin")
