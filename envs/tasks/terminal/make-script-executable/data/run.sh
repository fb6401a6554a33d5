#!/bin/bash
echo "run.sh: ok"
