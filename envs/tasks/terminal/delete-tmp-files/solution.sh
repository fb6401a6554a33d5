#!/bin/bash
find /app/work -type f -name '*.tmp' -delete
