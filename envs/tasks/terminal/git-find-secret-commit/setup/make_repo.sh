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
printf 'DEBUG=false\nPORT=8000\n' > settings.env
echo 'print("service")' > main.py
commit "Initial import"
printf 'DEBUG=false\nPORT=8000\nLOG_LEVEL=info\n' > settings.env
commit "Add log level"
echo 'print("service v2")' > main.py
commit "Bump service version"
printf 'DEBUG=false\nPORT=8080\nLOG_LEVEL=info\nAPI_KEY=sk_live_51HxT9f2e8d7c6b5a4\n' > settings.env
commit "Update env defaults"
echo '# Service' > README.md
commit "Add readme"
printf 'DEBUG=false\nPORT=8080\nLOG_LEVEL=info\n' > settings.env
commit "Clean up settings"
echo 'print("service v3")' > main.py
commit "Bump service version again"
