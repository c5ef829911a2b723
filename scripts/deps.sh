#!/usr/bin/env bash
# Keeps the dependency arrows of DESIGN.md §2 honest: wire and subjects are
# leaves; the pure runtime imports only wire and subjects; nothing imports cmd.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/baton-rt/baton
fail=0
check() { # package, allowed project imports (regex)
  local pkg=$1 allowed=$2
  [ -d "${pkg#./}" ] || return 0
  for imp in $(go list -f '{{join .Imports "\n"}}' "$pkg" | grep "^$mod" || true); do
    if ! [[ $imp =~ $allowed ]]; then echo "deps: $pkg must not import $imp"; fail=1; fi
  done
}
check ./subjects '^$'
check ./wire '^$'
check ./runtime "^$mod/(wire|subjects)\$"
check ./record "^$mod/(subjects)\$"
check ./kv "^$mod/(subjects|wire|record)\$"
check ./handoff "^$mod/(record|subjects)\$"
if go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./... | grep -E " $mod/cmd/" ; then echo "deps: nothing may import cmd/"; fail=1; fi
exit $fail
