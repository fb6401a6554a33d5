#!/bin/bash
cat > /app/dedupe.py <<'EOF'
import sys

seen = set()
for line in sys.stdin:
    addr = line.strip().lower()
    if addr and addr not in seen:
        seen.add(addr)
        print(addr)
EOF
