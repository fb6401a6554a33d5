#!/bin/bash
cat > /app/parse_env.py <<'EOF'
"""Parse a KEY=VALUE env file and print its settings as JSON.

Usage: python3 parse_env.py FILE

Rules: blank lines and lines starting with "#" (after leading spaces) are
ignored; keys and values are stripped of surrounding whitespace; a value wrapped
in a matching pair of double or single quotes has the quotes removed; values may
themselves contain "=". Output: one JSON object with the keys sorted.
"""
import json
import sys


def parse(path):
    result = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            result[key] = value
    return result


if __name__ == "__main__":
    print(json.dumps(parse(sys.argv[1]), sort_keys=True))
EOF
