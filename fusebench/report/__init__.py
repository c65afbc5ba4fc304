"""Showing results: the console table and progress lines, and the HTML report.

`table.py` (the table `fusebench run` prints), `progress.py` (progress lines on stderr),
`report.py` (the self-contained HTML page, from `templates/`), `charts.py` (its plotly figures).
"""
