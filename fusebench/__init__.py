"""fusebench: the harness that benchmarks the compiler and its peers on curated suites.

The subpackages follow a benchmark's data flow:

    cases/ -> measure/ -> history/ -> compare/ -> report/

- `cases`: what to benchmark: `Case` (a function, its inputs, reference and bytes model), the
  variants that run it (eager, torch.compile, our compiler, ...), suite discovery and selection.
- `measure`: checking a variant's result, then timing it (timers, clocks, L2 flushing), counting
  kernels, the machine's peak bandwidth, summary statistics, and the `Outcome` of one measurement.
- `history`: outcomes stored as ASV result files per commit, read back as a DataFrame, and the
  regressions (step changes) found in those histories.
- `compare`: two revisions measured in interleaved rounds in temporary git worktrees, and the
  per-benchmark verdicts.
- `report`: the console table and progress lines, and the HTML report with its charts.
- `integrations`: the same cases as ASV benchmarks and as pytest-benchmark tests.
- `commands`: one module per `fusebench` subcommand (`cli.py` dispatches to them).

`errors.py` and `files.py` are shared by all stages. Imports point down the flow (`measure` uses
`cases`, `history` uses `measure`, ...; `compare` and `report` both use the earlier stages, and
`compare` borrows `report.table`'s time format); nothing imports `commands` or `integrations`.
Inside the package a module imports names from the module that defines them, never through a
subpackage's `__init__`, which re-exports the public names for suites, scripts and users
(`from fusebench.cases import Case`, `from fusebench.history import read_results`).
"""
