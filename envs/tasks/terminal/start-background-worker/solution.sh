#!/bin/bash
cd /app
nohup /app/worker.sh > /dev/null 2>&1 &
echo $! > /app/worker.pid
sleep 1.5
