#!/bin/bash
python3 - <<'EOF'
import sqlite3
con = sqlite3.connect("/app/sales.db")
totals = dict(con.execute(
    "SELECT substr(sold_at, 1, 7), SUM(amount_cents) FROM sales "
    "WHERE refunded = 0 GROUP BY substr(sold_at, 1, 7)").fetchall())
with open("/app/monthly_revenue.csv", "w") as f:
    f.write("month,revenue\n")
    for m in range(1, 7):
        key = f"2024-{m:02d}"
        cents = totals.get(key, 0)
        f.write(f"{key},{cents // 100}.{cents % 100:02d}\n")
EOF
