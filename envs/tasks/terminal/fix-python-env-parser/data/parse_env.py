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
    for line in open(path):
        line = line.strip()
        if line.startswith("#"):
            continue
        key, value = line.split("=")
        value = value.strip()
        if value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        result[key] = value
    return result


if __name__ == "__main__":
    print(json.dumps(parse(sys.argv[1])))
