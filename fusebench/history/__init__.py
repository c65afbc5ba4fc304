"""Results over time: ASV result files per commit, read back as a DataFrame, and their regressions.

`results.py` (ASV's result-file format), `revision.py` (the commit measured), `regressions.py`
(step changes for the worse per benchmark series).
"""

from fusebench.history.regressions import Regression, find_regressions
from fusebench.history.results import RunInfo, read_results, write_outcomes

__all__ = ["Regression", "RunInfo", "find_regressions", "read_results", "write_outcomes"]
