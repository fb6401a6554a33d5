"""`python -m harness.compare <sweep_dir>`: a training sweep's comparison table and plot
(harness/reports/sweep.py)."""
from harness.reports.sweep import main

if __name__ == "__main__":
    raise SystemExit(main())
