#!/bin/bash
cd /app/repo
git log --format=%H -S 'API_KEY=' --reverse -- settings.env | head -n 1 > /app/answer.txt
