"""What to benchmark: cases, the variants that run them, and which suites and cases a command runs.

`case.py` (a case as data), `variants.py` (eager, torch.compile, our compiler, thunder),
`discovery.py` (suite modules that declare `CASES`), `selection.py` (the `--suite`, `-k`,
`--variant` flags), `training.py` (a call that runs a forward and its backward). A suite module
needs only the names re-exported here.
"""

from fusebench.cases.case import Case, Params, dtype_named, format_params, generator, random_tensor, variants_for
from fusebench.cases.training import forward_of_step, training_step
from fusebench.cases.variants import Compiled, SkipVariant, Target, Variant

__all__ = [
    "Case",
    "Compiled",
    "Params",
    "SkipVariant",
    "Target",
    "Variant",
    "dtype_named",
    "format_params",
    "forward_of_step",
    "generator",
    "random_tensor",
    "training_step",
    "variants_for",
]
