"""`python -m harness.general <sweep dir or scores.csv>... --out DIR`: the general-agent signal
comparison's scores.csv, table.md and curves.png (harness/reports/general.py)."""
from harness.reports.general import main

if __name__ == "__main__":
    raise SystemExit(main())
