"""Showing results: the console table and progress lines, the scoreboard, and the HTML report.

`table.py` (the table `fusebench run` prints), `progress.py` (progress lines on stderr),
`scoreboard.py` (rows of each variant's latest time per (suite, case, params), and ratios),
`summary.py` (`fusebench vs best peer`, the lines `fusebench run` ends with), `report.py` (the
self-contained HTML page, from `templates/`), `scoreboard_chart.py` (the scoreboard heatmap),
`suite_charts.py` (per-suite time, kernel and fusion charts), `machines.py` (a section per machine
and the selector), `charts.py` (shared plotly pieces and the bandwidth, recompilation and
comparison charts).
"""
