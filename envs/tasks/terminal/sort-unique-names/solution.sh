#!/bin/bash
sort -u /app/names.txt > /app/unique_names.txt
