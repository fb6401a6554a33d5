#!/bin/bash
cat > /app/stats.py <<'EOF'
"""Print statistics for a file of numbers.

Usage: python3 stats.py FILE

FILE has one number per line (integers or decimals, possibly negative);
blank lines are ignored. Prints one line:
count=<n> min=<smallest> max=<largest> mean=<mean with 2 decimals>
where min and max are printed as they appear in the file.
"""
import sys


def main(path):
    values = []
    raw = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            values.append(float(line))
            raw[float(line)] = line
    mean = sum(values) / len(values)
    lo = min(values)
    hi = max(values)
    print(f"count={len(values)} min={raw[lo]} max={raw[hi]} mean={mean:.2f}")


main(sys.argv[1])
EOF
