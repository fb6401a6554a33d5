#!/bin/bash
# Usage: archive_logs.sh DIR
# Compress every *.log file directly inside DIR with gzip (file.log -> file.log.gz)
# and finally print "Archived N files".
dir=$1
count=0
for f in $(ls $dir/*.log); do
    gzip $f
    count=$count+1
done
echo "Archived $cuont files"
