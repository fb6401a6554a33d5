#!/bin/bash
python3 - <<'EOF'
import csv, json
with open("/app/employees.csv", newline="") as f:
    rows = [{"id": int(r["id"]), "name": r["name"], "department": r["department"],
             "salary": int(r["salary"])} for r in csv.DictReader(f)]
with open("/app/employees.json", "w") as f:
    json.dump(rows, f, indent=2)
EOF
