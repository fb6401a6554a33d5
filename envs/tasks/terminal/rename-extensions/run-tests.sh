#!/bin/bash
cd /app
python3 -m pytest -q -p no:cacheprovider /tests/test_outputs.py -rA
