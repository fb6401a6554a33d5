#!/bin/bash
awk '{print $1}' /app/access.log | sort | uniq -c | sort -k1,1nr | head -n 1 \
  | awk '{print $2, $1}' > /app/top_ip.txt
