#!/usr/bin/env bash
# Baton on a laptop: make run, make deployment, make stop (README, "Set up"
# and "Upgrade"; docs/operations.md, "On a laptop").
#
#   run.sh run             NATS of its own (started detached, kept running,
#                          reused), then owner and ingress of v1 in the
#                          foreground; Ctrl-C drains them, NATS stays
#   run.sh deployment DEP  owner and ingress of DEP against that NATS, on the
#                          next free ports
#   run.sh stop            ends the NATS server
#
# Environment (the Makefile passes its variables): BIN (bin), DATA (./data),
# NATS_PORT (4222), HTTP_PORT (8080), METRICS_PORT (9101), PORT (deployment:
# its ingress port; default the first free one after HTTP_PORT).
#
# Signals: the terminal sends Ctrl-C's SIGINT to the whole foreground
# process group, owner and ingress included, so this script passes nothing
# on: one Ctrl-C is one signal, a drain; a second Ctrl-C is a second signal,
# which aborts. A SIGTERM sent to the whole group (kill -TERM -- -PGID) is
# the same: owner and ingress have it, and the copy make passes on to this
# script is not passed on again (twice would abort the drain). A SIGTERM
# sent to make alone (make passes it on) or to this script alone is passed
# on, once per signal. Which of the two a SIGTERM was, the sentinel tells
# (group_signalled).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
DATA=${DATA:-./data}
NATS_PORT=${NATS_PORT:-4222}
HTTP_PORT=${HTTP_PORT:-8080}
METRICS_PORT=${METRICS_PORT:-9101}
NATS_URL=nats://127.0.0.1:$NATS_PORT
pidfile=$DATA/nats.pid
natslog=$DATA/nats.log
tokenfile=$DATA/admin-token
keyfile=$DATA/stream-token-key

say() { echo "baton: $*"; }
die() { echo "baton: $*" >&2; exit 1; }

# listening PORT: something accepts connections on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port FROM: the first port from FROM on that nothing listens on.
free_port() {
  local p=$1
  while listening "$p"; do p=$((p + 1)); done
  echo "$p"
}

# nats_pid: the pid of this data directory's NATS server, if it runs.
nats_pid() {
  local pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  ps -p "$pid" -o args= 2>/dev/null | grep -q -- '--nats-only' || return 1
  echo "$pid"
}

# ensure_nats: reuse this directory's NATS server, or start one detached:
# its own process group (the terminal's Ctrl-C does not reach it), immune to
# the terminal's hang-up, log in $DATA/nats.log. The store lock
# ($DATA/nats.lock) refuses a second server on the store.
ensure_nats() {
  local pid
  if pid=$(nats_pid); then
    say "NATS $NATS_URL is running (pid $pid, store $DATA); reusing it"
    return
  fi
  if listening "$NATS_PORT"; then
    die "127.0.0.1:$NATS_PORT is taken by a process that is not the NATS server of $DATA; stop it, or set NATS_PORT"
  fi
  mkdir -p "$DATA"
  (
    set -m
    nohup "$BIN/owner" --nats-only --data-dir "$DATA" --nats-listen "127.0.0.1:$NATS_PORT" \
      --log-format json >>"$natslog" 2>&1 </dev/null &
    echo $! >"$pidfile"
  )
  pid=$(cat "$pidfile")
  for _ in $(seq 1 1200); do # up to 2 minutes: JetStream recovers the store first
    listening "$NATS_PORT" && break
    kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; die "the NATS server did not start; the end of $natslog:
$(tail -n 5 "$natslog")"; }
    sleep 0.1
  done
  listening "$NATS_PORT" || die "the NATS server (pid $pid) is not listening on 127.0.0.1:$NATS_PORT after 2 minutes; see $natslog"
  say "NATS $NATS_URL started (pid $pid, store $DATA, log $natslog); it keeps running after Ctrl-C: make stop ends it"
}

# admin_token: the development admin token, generated once, kept in $DATA.
admin_token() {
  if [ ! -s "$tokenfile" ]; then
    mkdir -p "$DATA"
    (umask 077 && echo "dev-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$tokenfile")
  fi
  cat "$tokenfile"
}

# stream_token_key: the development key of the ingress's stream tokens
# (the inspector's EventSource), 64 hex digits generated once, kept in
# $DATA; every ingress of make run and make deployment shares it.
stream_token_key() {
  if [ ! -s "$keyfile" ]; then
    mkdir -p "$DATA"
    (umask 077 && echo "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$keyfile")
  fi
}

# running_instance DEP: the holder line of DEP's lock while its owner lives.
running_instance() {
  local lock=$DATA/owner-$1.lock line pid
  [ -s "$lock" ] || return 1
  line=$(head -n 1 "$lock")
  pid=${line#pid }
  pid=${pid%%:*}
  case $pid in '' | *[!0-9]*) return 1 ;; esac
  ps -p "$pid" -o args= 2>/dev/null | grep -q -- '--lock-file' || return 1
  echo "$line"
}

# refuse_running DEP: exit at once if DEP's owner runs from $DATA already.
refuse_running() {
  local holder
  if holder=$(running_instance "$1"); then
    die "deployment $1 already runs from $DATA ($holder); stop it first (Ctrl-C in its terminal)"
  fi
}

# refuse_taken HTTP METRICS: exit at once if another program listens on
# the ingress's or the owner's metrics port. The readiness checks below
# would take that program for ours and print the banner while ingress or
# owner failed to listen.
refuse_taken() {
  if listening "$1"; then
    die "port $1 is in use: the ingress cannot listen on it (set HTTP_PORT; PORT for make deployment)"
  fi
  if listening "$2"; then
    die "port $2 is in use: the owner's metrics cannot listen on it (set METRICS_PORT)"
  fi
}

describe() { # exit status → words
  if [ "$1" -eq 0 ]; then echo "exit 0"
  elif [ "$1" -gt 128 ]; then echo "ended by signal $(($1 - 128)) (status $1)"
  else echo "exit $1"; fi
}

owner=
ingress=
sentinel= # a process of this group that only a signal to the group ends
stopping= # set by a signal
trapped=  # set by a signal, cleared before each wait
status=

# nap SECONDS: sleep, quietly: a SIGTERM to the group ends the sleep too,
# and bash would report that ("Terminated"), where a Ctrl-C's SIGINT ends
# it silently.
nap() { { sleep "$1"; } 2>/dev/null || true; }

# start_sentinel: a process in this script's process group that nothing
# but a signal to the whole group ends (SIGTERM's default action; a
# background process of a script ignores SIGINT), its output not make's.
# It ends itself within a second of this script's end, however that ends.
start_sentinel() {
  (while kill -0 $$ 2>/dev/null; do sleep 1; done) </dev/null >/dev/null 2>&1 &
  sentinel=$!
}

# group_signalled: the SIGTERM this script got was sent to the whole
# process group (owner and ingress have it too) if it ended the sentinel;
# that takes a moment, so wait up to a second for it.
group_signalled() {
  local _
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    kill -0 "$sentinel" 2>/dev/null || return 0
    nap 0.1
  done
  return 1
}

# on_term: a SIGTERM. Owner and ingress are told only if it did not reach
# them: sent to this script alone, or to make, which passes its own on.
# make also passes on a SIGTERM sent to the group; that copy finds the
# sentinel ended too, so it is not passed on a second time.
on_term() {
  trapped=1 stopping=1
  group_signalled || kill -TERM $owner $ingress 2>/dev/null || true
}

# reap PID: wait for PID to end and set status to its exit status. It polls
# rather than blocking in `wait`: a trapped signal cuts a blocking wait short,
# and bash may reap the child in that instant and answer the next wait with a
# status that is not the child's (seen: -1). Once the child is gone, wait
# returns the status bash kept for it.
reap() {
  local again
  while kill -0 "$1" 2>/dev/null; do nap 0.1; done
  trapped=
  if wait "$1" 2>/dev/null; then status=0; else status=$?; fi
  if [ -n "$trapped" ]; then # a signal in that instant: ask once more
    if wait "$1" 2>/dev/null; then again=0; else again=$?; fi
    [ "$again" -ne 127 ] && status=$again
  fi
  return 0
}

# foreground DEP HTTP METRICS: owner and ingress of DEP until they end.
foreground() {
  local dep=$1 http=$2 metrics=$3 token holder orc irc export_url=
  token=$(admin_token)
  stream_token_key
  # SIGINT: the terminal sent it to the whole group, owner and ingress have
  # it already. SIGTERM: on_term.
  start_sentinel
  trap 'kill "$sentinel" 2>/dev/null || true' EXIT
  trap 'trapped=1 stopping=1' INT
  trap on_term TERM
  "$BIN/owner" --deployment-id "$dep" --nats-url "$NATS_URL" --metrics-listen "127.0.0.1:$metrics" \
    --lock-file "$DATA/owner-$dep.lock" &
  owner=$!
  until [ -n "$stopping" ] || listening "$metrics"; do
    if ! kill -0 "$owner" 2>/dev/null; then
      reap "$owner"
      holder=$(running_instance "$dep") && die "deployment $dep already runs from $DATA ($holder); stop it first"
      die "the $dep owner did not start ($(describe "$status"))"
    fi
    nap 0.1
  done
  "$BIN/ingress" --deployment-id "$dep" --nats-url "$NATS_URL" --listen "127.0.0.1:$http" \
    --insecure-dev --admin-token-file "$tokenfile" --ui --stream-token-key-file "$keyfile" &
  ingress=$!
  until [ -n "$stopping" ] || listening "$http" || ! kill -0 "$ingress" 2>/dev/null; do nap 0.1; done
  if [ -z "$stopping" ] && kill -0 "$ingress" 2>/dev/null; then
    # off the default port, the line that points the nats CLI here
    [ "$NATS_PORT" = 4222 ] || export_url="
            export NATS_URL=$NATS_URL   (the nats CLI's default is port 4222)"
    cat <<EOF
baton: deployment $dep is running
  ingress   http://127.0.0.1:$http   (--insecure-dev: no user token needed; admin routes on)
  ui        http://127.0.0.1:$http/ui/   (the session inspector: paste the admin token below into its form)
  admin     export A='Authorization: Bearer $token'   (token in $tokenfile)
  metrics   http://127.0.0.1:$metrics/metrics
  NATS      $NATS_URL$export_url
  Ctrl-C drains owner and ingress and exits; a second Ctrl-C aborts the drain. NATS keeps running.
EOF
  fi
  # Until a signal, or until either process ends: then the other is told.
  while [ -z "$stopping" ] && kill -0 "$owner" 2>/dev/null && kill -0 "$ingress" 2>/dev/null; do
    nap 0.2
  done
  [ -n "$stopping" ] || kill -TERM "$owner" "$ingress" 2>/dev/null || true
  reap "$owner"
  orc=$status
  reap "$ingress"
  irc=$status
  say "deployment $dep stopped: owner $(describe "$orc"), ingress $(describe "$irc")"
  [ "$orc" -eq 0 ] && [ "$irc" -eq 0 ]
}

stop_nats() {
  local pid
  if ! pid=$(nats_pid); then
    rm -f "$pidfile"
    say "no NATS server of $DATA is running"
    return
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; say "NATS server stopped (pid $pid)"; return; }
    sleep 0.1
  done
  die "the NATS server (pid $pid) did not stop within 30 s"
}

# The whole script is read before anything runs (a function, then exit):
# editing or checking out this file while make run runs cannot change it.
main() {
  case ${1:-} in
  run)
    refuse_running v1
    refuse_taken "$HTTP_PORT" "$METRICS_PORT"
    ensure_nats
    foreground v1 "$HTTP_PORT" "$METRICS_PORT"
    ;;
  deployment)
    dep=${2:-}
    [ -n "$dep" ] || die "give the deployment: make deployment DEP=v2"
    refuse_running "$dep"
    nats_pid >/dev/null || listening "$NATS_PORT" || die "no NATS server on $NATS_URL: start one with make run"
    http=${PORT:-$(free_port $((HTTP_PORT + 1)))}
    metrics=$(free_port $((METRICS_PORT + 1)))
    refuse_taken "$http" "$metrics"
    foreground "$dep" "$http" "$metrics"
    ;;
  stop) stop_nats ;;
  *) die "usage: $0 run | deployment DEP | stop" ;;
  esac
}

main "$@"; exit
