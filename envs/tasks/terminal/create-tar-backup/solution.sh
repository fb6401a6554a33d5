#!/bin/bash
cd /app && tar --exclude='*.log' -czf /app/backup.tar.gz site
