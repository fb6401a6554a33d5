#!/bin/bash
cd /tests
python3 -I -m pytest -q -p no:cacheprovider /tests/test_outputs.py -rA
