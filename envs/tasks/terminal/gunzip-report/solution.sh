#!/bin/bash
gunzip -k /app/report.txt.gz
