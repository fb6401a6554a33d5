#!/bin/bash
# Appends a heartbeat line to /app/heartbeat.log every second, forever.
while true; do
  echo "beat $(date +%s)" >> /app/heartbeat.log
  sleep 1
done
