#!/bin/bash
sed -i '/^\[server\]/,/^\[/ s/^port = 8080$/port = 9090/' /app/app.conf
