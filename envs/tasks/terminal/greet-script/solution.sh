#!/bin/bash
cat > /app/greet.sh <<'EOF'
#!/bin/bash
if [ "$#" -lt 1 ]; then
  echo "Usage: greet.sh NAME" >&2
  exit 1
fi
echo "Hello, $1!"
EOF
chmod +x /app/greet.sh
