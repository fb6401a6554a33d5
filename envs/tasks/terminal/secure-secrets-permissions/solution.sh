#!/bin/bash
chmod 700 /app/deploy/secrets
chmod 600 /app/deploy/secrets/*
chmod 755 /app/deploy/public
find /app/deploy/public -type f -exec chmod 644 {} +
find /app/deploy/public -type f -name '*.sh' -exec chmod 755 {} +
