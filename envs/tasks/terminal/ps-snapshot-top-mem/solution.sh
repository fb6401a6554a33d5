#!/bin/bash
{
  echo "top_pid=$(tail -n +2 /app/ps.txt | sort -k6,6nr | head -n 1 | awk '{print $2}')"
  echo "postgres_rss_kib=$(awk 'NR > 1 && $1 == "postgres" {s += $6} END {print s}' /app/ps.txt)"
} > /app/mem_report.txt
