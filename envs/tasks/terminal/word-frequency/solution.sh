#!/bin/bash
tr 'A-Z' 'a-z' < /app/story.txt | tr -cs 'a-z' '\n' | grep -v '^$' \
  | sort | uniq -c | sort -k1,1nr -k2,2 | head -n 10 \
  | awk '{print $2, $1}' > /app/top_words.txt
