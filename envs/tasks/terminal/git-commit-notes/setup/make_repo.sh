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
mkdir -p /app/repo && cd /app/repo && git init -q -b main
printf '# Inventory service\n\nTracks stock levels.\n' > README.md
commit "Initial commit"
