#!/usr/bin/env bash
# Runs every fuzz target (func FuzzX in a _test.go file) for $1 each.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-15s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  pkg=./$(dirname "${f#./}")
  for name in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "fuzz $pkg $name ($t)"
    go test -run '^$' -fuzz "^${name}\$" -fuzztime "$t" "$pkg"
  done
done
