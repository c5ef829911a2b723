#!/usr/bin/env bash
# make e2e-smoke: the compose stack up, cmd/e2e against it, the stack down
# again whatever happened (containers, network and volumes). Bounded: the
# stack's start by E2E_UP_TIMEOUT, the checks by E2E_TIMEOUT.
# The stack's logs are kept in build/e2e-stack.log.
# COMPOSE is the compose command with project and file (the Makefile sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${COMPOSE:?set by make e2e-smoke}"
GO=${GO:-go}
E2E_TIMEOUT=${E2E_TIMEOUT:-3m}
E2E_UP_TIMEOUT=${E2E_UP_TIMEOUT:-120}
start=$(date +%s)
rc=1
cleanup() {
  $COMPOSE logs --no-color --timestamps >build/e2e-stack.log 2>&1 || true
  if [ "$rc" -ne 0 ]; then
    echo "e2e-smoke: FAILED; the stack's last log lines:"
    $COMPOSE logs --no-color --tail=40 || true
  fi
  timeout 120 $COMPOSE down -v --remove-orphans -t 5 || true
  if [ "$rc" -ne 0 ] && [ -s build/e2e-smoke.out ]; then
    echo "e2e-smoke: FAILED; the checks' last lines (build/e2e-smoke.out):"
    tail -n 15 build/e2e-smoke.out
  fi
  echo "e2e-smoke: done in $(( $(date +%s) - start ))s"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timeout 60 $COMPOSE down -v --remove-orphans -t 5 >/dev/null 2>&1 || true  # a stale stack of an earlier run
CGO_ENABLED=0 $GO build -o build/e2e ./cmd/e2e
timeout "$E2E_UP_TIMEOUT" $COMPOSE up -d
: >build/e2e-smoke.out
./build/e2e -timeout "$E2E_TIMEOUT" 2>&1 | tee build/e2e-smoke.out
rc=0
