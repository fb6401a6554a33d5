#!/bin/bash
jq -r '.[] | select(.active) | .username' /app/users.json > /app/active_users.txt
