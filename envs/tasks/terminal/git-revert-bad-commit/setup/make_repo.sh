#!/bin/bash
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Dev" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Dev" GIT_COMMITTER_EMAIL="dana@example.com"
n=0
commit() {  # commit "<message>"
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-01-0${n}T12:00:00Z" GIT_COMMITTER_DATE="2024-01-0${n}T12:00:00Z"
  git add -A && git commit -q -m "$1"
}

mkdir -p /app/project && cd /app/project && git init -q -b main
cat > calc.py <<'EOF'
"""A tiny calculator module."""


def add(a, b):
    return a + b


def subtract(a, b):
    return a - b


def negate(a):
    return -a


def square(a):
    return a * a
EOF
commit "Initial calculator"
cat >> calc.py <<'EOF'


def multiply(a, b):
    return a * b
EOF
commit "Add multiply"
sed -i 's/    return a - b/    return a + b/' calc.py
commit "Optimize subtract"
printf '# calc\n\nA tiny calculator.\n' > README.md
commit "Add README"
cat >> calc.py <<'EOF'


def divide(a, b):
    return a / b
EOF
commit "Add divide"
