#!/bin/bash
jq '[.items[] | select(.in_stock) | .price * .qty] | add' /app/inventory.json \
  | xargs printf '%.2f\n' > /app/total.txt
