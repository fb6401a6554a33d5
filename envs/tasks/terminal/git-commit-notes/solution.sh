#!/bin/bash
cd /app/repo
echo 'Remember to update the changelog.' > NOTES.md
git add NOTES.md
git commit -q -m 'Add release notes'
