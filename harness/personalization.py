"""`python -m harness.personalization <sweep dir or scores.csv>... --out DIR`: the personal-agent
experiment's scores.csv, table.md and curves.png (harness/reports/personalization.py)."""
from harness.reports.personalization import main

if __name__ == "__main__":
    raise SystemExit(main())
