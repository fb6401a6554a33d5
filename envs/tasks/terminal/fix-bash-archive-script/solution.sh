#!/bin/bash
cat > /app/archive_logs.sh <<'EOF'
#!/bin/bash
# Usage: archive_logs.sh DIR
# Compress every *.log file directly inside DIR with gzip (file.log -> file.log.gz)
# and finally print "Archived N files".
dir=$1
count=0
for f in "$dir"/*.log; do
    [ -f "$f" ] || continue
    gzip -- "$f"
    count=$((count + 1))
done
echo "Archived $count files"
EOF
