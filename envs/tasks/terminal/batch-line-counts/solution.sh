#!/bin/bash
cd /app/inbox
{
  echo "file,lines"
  for f in *.txt; do
    printf '%s,%s\n' "$f" "$(wc -l < "$f")"
  done | LC_ALL=C sort
} > /app/line_counts.csv
