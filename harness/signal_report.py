"""`python -m harness.signal_report <sweep dir or signal_comparison.csv>... [--out DIR]`: the signal
comparison of training sweeps, paired by seed against outcome reward (harness/reports/signal_comparison.py)."""
from harness.reports.signal_comparison import main

if __name__ == "__main__":
    raise SystemExit(main())
