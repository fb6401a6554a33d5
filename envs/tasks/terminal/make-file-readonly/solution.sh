#!/bin/bash
chmod 444 /app/report.txt
