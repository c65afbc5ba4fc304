"""Comparing two revisions: `fusebench compare A B`.

`worktree.py` (temporary git worktrees), `interleave.py` (each side's runs in interleaved rounds),
`decide.py` (a hierarchical bootstrap of the ratio plus a minimum effect), `comparison.py` (verdicts, table,
document), `arguments.py` (the flags of how revisions are measured and judged, shared with `bisect`).
"""
