#!/bin/bash
chown -R www-data:www-data /app/site
find /app/site -type d -exec chmod 755 {} +
find /app/site -type f -exec chmod 644 {} +
