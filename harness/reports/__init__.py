"""Runs aggregated into tables: ONE aggregation (`aggregate.py`: mean and 95% t-interval over seeds,
differences paired by seed against the outcome-reward baseline, one way to name a method), read from
the places runs leave numbers (`leaderboard.py`: results/leaderboard.csv; `sweep.py`,
`signal_comparison.py`, `personalization.py`: a sweep's run dirs), and written out by `tables.py`
(BFCL-style tables), `html_report.py` (CSVs and index.html), `plots.py` (PNGs) and `console.py`
(tables printed). The `python -m harness.<name>` entry points are a few lines each that call in here.
"""
