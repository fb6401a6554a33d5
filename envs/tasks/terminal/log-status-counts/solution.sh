#!/bin/bash
awk '{c[$9]++} END {printf "{"; sep=""; for (k in c) {printf "%s\"%s\": %d", sep, k, c[k]; sep=", "}; print "}"}' \
  /app/access.log > /app/status_counts.json
