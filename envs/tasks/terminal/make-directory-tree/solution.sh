#!/bin/bash
mkdir -p /app/project/src /app/project/tests /app/project/docs
touch /app/project/README.md
