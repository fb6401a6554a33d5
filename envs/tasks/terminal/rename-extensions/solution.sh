#!/bin/bash
cd /app/photos
for f in *.jpeg; do
  [ -e "$f" ] || continue
  mv -- "$f" "${f%.jpeg}.jpg"
done
