#!/usr/bin/env bash
# testbin.sh DIR: builds, once for a whole `make test`, the binaries its
# tests run as processes, into DIR under the names
# internal/proctest.PrebuiltName gives them (import path with "/" as "_",
# then -race or -norace). make test hands DIR to the tests in
# BATON_TEST_BINDIR; a test whose binary is not here builds its own.
# The links run two at a time (a race link takes most of a core).
set -euo pipefail
dir=$1
go=${GO:-go}
mod=github.com/baton-rt/baton
rm -rf "$dir"
mkdir -p "$dir"
build() { # race|norace import-path
  local flag=
  [ "$1" = race ] && flag=-race
  $go build $flag -o "$dir/$(echo "$2" | tr / _)-$1" "$2"
}
run2() { # runs its arguments' builds two at a time; fails if any fails
  local pids=() fail=0
  while [ $# -gt 0 ]; do
    build "$1" "$2" & pids+=($!)
    shift 2
    if [ ${#pids[@]} -eq 2 ]; then
      for p in "${pids[@]}"; do wait "$p" || fail=1; done
      pids=()
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || fail=1; done
  return $fail
}
run2 race $mod/cmd/owner race $mod/cmd/ingress \
  norace $mod/cmd/owner norace $mod/cmd/ingress \
  race $mod/examples/llm race $mod/test/remote/workerproc \
  norace github.com/nats-io/nats-server/v2
