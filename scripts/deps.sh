#!/usr/bin/env bash
# Keeps the package dependency arrows of docs/architecture.md ("Dependency
# arrows") honest, row by row: wire and subjects are
# leaves; protocol (the request/reply bodies) imports only them; the pure
# runtime imports only wire, subjects and record; record and kv store what
# record defines; handoff never imports kv; the JetStream port adapters
# (runtime/jsport) sit below the pool; the ingress, library and binary,
# holds no owner-side package, not even transitively; the test harness
# (internal/harness) is imported only by tests and cmd/e2e, and holds no
# owner-side package but through its subpackage inproc; the public owner
# SDK (owner) holds no test plumbing, and cmd/owner is owner with the demo
# agent; the examples import public packages only; nothing imports cmd.
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
# forbid: package, project packages it must not hold among all its deps (regex)
forbid() {
  local pkg=$1 banned=$2
  [ -d "${pkg#./}" ] || return 0
  for dep in $(go list -deps "$pkg" | grep "^$mod" || true); do
    if [[ $dep =~ $banned ]]; then echo "deps: $pkg must not depend on $dep"; fail=1; fi
  done
}
check ./subjects '^$'
check ./wire '^$'
check ./runtime "^$mod/(wire|subjects|record)\$"
check ./record "^$mod/(subjects|wire)\$"
check ./kv "^$mod/(subjects|wire|record|internal/stages)\$"
check ./handoff "^$mod/(record|subjects|protocol|internal/failpoint)\$"
check ./protocol "^$mod/(wire|subjects)\$"
# the API description (docs/openapi.yaml, embedded): a leaf
check ./docs '^$'
# the generated client of docs/openapi.yaml: what another team's code is
check ./test/apiclient '^$'
# the ingress's session inspector (embedded static files): a leaf
check ./ingress/ui '^$'
# failpoints: a leaf the owner side names its fault points in
check ./internal/failpoint '^$'
# the delivery's stage marks (make bench's breakdown, -tags batonstages): a leaf
check ./internal/stages '^$'
# the per-session driver never reaches back into the process pool
check ./runtime/session "^$mod/(wire|subjects|record|runtime|handoff|internal/failpoint|internal/stages)\$"
forbid ./runtime/session "^$mod/(runtime/pool|kv)(/|\$)"
# the remote agent is an agent: it knows the runtime's agent API, wire's
# shapes and the subjects, nothing of the owner process or its stores
check ./runtime/remote "^$mod/(wire|subjects|runtime)\$"
# the event appender is owner-side: an owner is the one writer of a
# session's events (docs/architecture.md, "One writer"); it stores through kv
check ./runtime/eventlog "^$mod/(kv|record|wire)\$"
# the JetStream port adapters sit below the pool: they implement the
# session's ports over kv, wire and the subjects, and know nothing of the
# owner process that wires them
check ./runtime/jsport "^$mod/(kv|runtime|runtime/session|subjects|wire|internal/stages)\$"
forbid ./runtime/jsport "^$mod/(runtime/pool|owner|ingress)(/|\$)"
owner_side="^$mod/(owner|runtime/pool|runtime/session|runtime/jsport|runtime/eventlog|handoff|runtime/demo)(/|\$)"
forbid ./ingress "$owner_side"
forbid ./cmd/ingress "$owner_side"
# the ingress appends no event: it imports no event appender, not even
# transitively (an operator's end or retry is a request an owner finishes)
forbid ./ingress "^$mod/runtime/eventlog(/|\$)"
for dir in $(go list -deps -f '{{if .Module}}{{if eq .Module.Path "'"$mod"'"}}{{.Dir}}{{end}}{{end}}' ./ingress); do
  if grep -l "^func NewAppender" $(go list -f '{{range .GoFiles}}{{$.Dir}}/{{.}} {{end}}' "$dir") >/dev/null 2>&1; then
    echo "deps: the ingress depends on $dir, which holds an event appender"; fail=1
  fi
done
# internal/harness: test plumbing. Its core imports neither runtime/pool, runtime/session
# nor handoff (so the owner packages' internal tests can import it; inproc
# runs the driver's Owner), and no non-test package but cmd/e2e imports it.
forbid ./internal/harness "^$mod/(runtime/pool|runtime/session|handoff)(/|\$)"
if go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./... | grep -E " $mod/internal/harness(/| |\$)" |
  grep -vE "^$mod/(cmd/e2e|internal/harness(/[^:]*)?):"; then
  echo "deps: only tests and cmd/e2e may import internal/harness"; fail=1
fi
# owner: what a user's owner binary imports. Its code (not its tests) holds
# no test plumbing: not internal/harness, natstest, natsproc, proctest,
# testsize or oldbuild, not even through another package.
forbid ./owner "^$mod/internal/(harness|natstest|natsproc|proctest|testsize|oldbuild)(/|\$)"
# nor the demo agent: --exec-log is internal/execlog's, a leaf
forbid ./owner "^$mod/runtime/demo(/|\$)"
check ./internal/execlog '^$'
check ./internal/oldbuild '^$'
check ./cmd/owner "^$mod/(owner|runtime|runtime/demo)\$"
# test/remote/worker is a worker as any language writes it: no Baton package
forbid ./test/remote/worker "^$mod/(wire|subjects|runtime|record|kv|protocol|owner|ingress|internal)(/|\$)"
# test/remote/workerproc is such a worker as a process: package worker only
check ./test/remote/workerproc "^$mod/test/remote/worker\$"
# examples/...: what another module's binary could be. Its code (not its
# tests) imports only the public packages owner, runtime, wire and subjects.
if [ -d examples ]; then
  for imp in $(go list ./examples/...); do
    check "./${imp#"$mod"/}" "^$mod/(owner|runtime|wire|subjects)\$"
  done
fi
if go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./... | grep -E " $mod/cmd/" ; then echo "deps: nothing may import cmd/"; fail=1; fi
exit $fail
