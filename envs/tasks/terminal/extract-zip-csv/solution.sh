#!/bin/bash
mkdir -p /app/csv
unzip -j -o /app/bundle.zip '*.csv' -d /app/csv
