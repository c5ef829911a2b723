#!/usr/bin/env bash
# make e2e: the full rolling-upgrade scenario on the compose stack
# with the e2e override (deploy/compose.e2e.yaml): cmd/e2e -scenario full
# with E2E_SESSIONS sessions (default 300), then the stack down again
# whatever happened (containers, network, volumes). Bounded: the stack's
# start by E2E_UP_TIMEOUT, the scenario by E2E_TIMEOUT (cmd/e2e's own bound;
# E2E_HARD_TIMEOUT kills it if it hangs).
# Kept afterwards: build/e2e-stack.log (every container's log),
# build/e2e-logs/<process>.jsonl (the owners' step logs).
# COMPOSE is the compose command with project and both files (make e2e sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${COMPOSE:?set by make e2e}"
GO=${GO:-go}
E2E_SESSIONS=${E2E_SESSIONS:-300}
E2E_TIMEOUT=${E2E_TIMEOUT:-8m}
E2E_HARD_TIMEOUT=${E2E_HARD_TIMEOUT:-540}   # seconds; kills a hung ./build/e2e
E2E_UP_TIMEOUT=${E2E_UP_TIMEOUT:-120}
start=$(date +%s)
rc=1
cleanup() {
  $COMPOSE logs --no-color --timestamps >build/e2e-stack.log 2>&1 || true
  if [ "$rc" -ne 0 ]; then
    echo "e2e: FAILED; the stack's last log lines:"
    $COMPOSE logs --no-color --tail=30 || true
  fi
  timeout 120 $COMPOSE down -v --remove-orphans -t 5 || true
  echo "e2e: done in $(( $(date +%s) - start ))s"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timeout 60 $COMPOSE down -v --remove-orphans -t 5 >/dev/null 2>&1 || true  # a stale stack of an earlier run
rm -rf build/e2e-logs && mkdir -p build/e2e-logs
CGO_ENABLED=0 $GO build -o build/e2e ./cmd/e2e
timeout "$E2E_UP_TIMEOUT" $COMPOSE up -d
COMPOSE="$COMPOSE" timeout "$E2E_HARD_TIMEOUT" ./build/e2e -scenario full -sessions "$E2E_SESSIONS" -timeout "$E2E_TIMEOUT" \
  -admin-token-file deploy/e2e/admin-token -exec-log-dir build/e2e-logs -lease-ttl 2s
rc=0
