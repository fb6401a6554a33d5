#!/bin/bash
cd /app/repo
git checkout -q -b feature/greeting main
echo 'Hello, world!' > greeting.txt
git commit -q -am 'Update greeting'
