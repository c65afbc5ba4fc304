"""Comparing two revisions: `fusebench compare A B`.

`worktree.py` (temporary git worktrees), `interleave.py` (each side's runs in interleaved rounds),
`decide.py` (Welch's t-test on round medians plus a minimum effect), `comparison.py` (verdicts, table, document).
"""
