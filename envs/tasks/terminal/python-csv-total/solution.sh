#!/bin/bash
cat > /app/total.py <<'EOF'
import csv
import sys
from decimal import Decimal

total = Decimal("0")
with open(sys.argv[1], newline="") as f:
    for row in csv.DictReader(f):
        if row["status"] == "paid":
            total += Decimal(row["amount"])
print(f"{total:.2f}")
EOF
