#!/usr/bin/env bash
# make run: an owner (embedding NATS with JetStream on 127.0.0.1:4222, store
# ./data) and an ingress on 127.0.0.1:8080 for deployment $DEPLOYMENT (v1).
set -euo pipefail
cd "$(dirname "$0")/.."
DEPLOYMENT=${DEPLOYMENT:-v1}
pids=()
cleanup() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

./bin/owner --deployment-id "$DEPLOYMENT" --log-format text &
pids+=($!)
for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && break
  sleep 0.1
done
./bin/ingress --deployment-id "$DEPLOYMENT" --insecure-dev --log-format text &
pids+=($!)
echo "baton: NATS nats://127.0.0.1:4222, ingress http://127.0.0.1:8080, deployment $DEPLOYMENT (Ctrl-C stops)"
wait -n "${pids[@]}"
