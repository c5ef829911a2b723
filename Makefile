# Baton — see README.md. Every target installs nothing globally.
GO       ?= go
FUZZTIME ?= 15s
PKGS     := ./...
TESTFLAGS ?=
# the packages make test runs a second time without the race detector
# (their CPU-bound samples; internal/testsize.PickRaced)
PURE_PKGS := ./wire ./runtime
# TESTP: how many test binaries (and builds) make test runs at once (go
# test -p; its default is one per CPU). Most packages' tests wait on NATS
# round trips, timers and leases, so more binaries overlap those waits:
# on 2 CPUs a warm run alone took 6:03 with 2 (138 % CPU) and 4:56 with 3,
# and two runs at once with 3 stayed green (13:31, 13:34). With 4, two
# runs at once overloaded the three-node cluster tests past their
# timeouts. Empty is go test's default.
TESTP    ?= 3
# TESTPARALLEL: how many tests of one package run at once (go test
# -parallel; its default is one per CPU). Most of the suite's parallel
# tests wait on NATS round trips, timers and leases: runtime/pool alone
# took 118 s at 0.8 CPU with 2 and 67 s with 4, and make test alone fell
# from 6:52 to 5:48 on 2 CPUs; two make tests at once stay green.
TESTPARALLEL ?= 4
IMAGE_TAG ?= dev
IMAGES_DIR := build/images
# docker compose (v2 plugin) if present, else Debian's standalone docker-compose
COMPOSE ?= $(shell if docker compose version >/dev/null 2>&1; then echo docker compose; \
             elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; fi)
COMPOSE_PROJECT ?= baton
# make run / make deployment / make stop (scripts/run.sh): binaries, store
# and ports; DEP names the deployment `make deployment` starts, PORT its
# ingress port (default: the first free one after HTTP_PORT)
BIN          ?= bin
DATA         ?= ./data
NATS_PORT    ?= 4222
HTTP_PORT    ?= 8080
METRICS_PORT ?= 9101
DEP          ?=
PORT         ?=
# make llm: more flags of the LLM example (e.g. --model llama3.2)
LLM_FLAGS    ?=
# the VCS revision --version prints when the build has no VCS stamp (a git
# worktree, GOFLAGS=-buildvcs=false)
REVISION := $(shell r=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null && echo $$r || echo "$$r (modified)"; })
LDFLAGS  := -X 'github.com/baton-rt/baton/internal/app.Revision=$(REVISION)'
RUNENV    = BIN='$(BIN)' DATA='$(DATA)' NATS_PORT='$(NATS_PORT)' HTTP_PORT='$(HTTP_PORT)' METRICS_PORT='$(METRICS_PORT)' PORT='$(PORT)'
# the image tag compose.yaml runs
export BATON_IMAGE_TAG := $(IMAGE_TAG)
DC = $(COMPOSE) -p $(COMPOSE_PROJECT) -f compose.yaml

.PHONY: all build run deployment stop llm test test-upgrade soak bench bench-check lint staticcheck fmt-check vet deps sizes docimports apiclient-check fuzz clean images up down compose-check e2e-smoke e2e

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags="$(LDFLAGS)" -o $(BIN)/owner ./cmd/owner
	CGO_ENABLED=0 $(GO) build -ldflags="$(LDFLAGS)" -o $(BIN)/ingress ./cmd/ingress

## run: a NATS server of its own (JetStream, store ./data; started detached
## and kept running, reused by the next make run), then the v1 owner
## (metrics :9101) and ingress (:8080, admin routes on) in the foreground;
## Ctrl-C drains them, NATS stays. A second make run is refused.
run: build
	@$(RUNENV) exec ./scripts/run.sh run

## deployment: owner and ingress of DEP (make deployment DEP=v2) against the
## NATS server of make run, on the next free ports
deployment: build
	@$(RUNENV) exec ./scripts/run.sh deployment '$(DEP)'

## stop: ends the NATS server make run started
stop:
	@$(RUNENV) exec ./scripts/run.sh stop

## llm: the LLM example agent (examples/llm) as deployment llm1 against the
## NATS server of make run; the model server from OPENAI_BASE_URL and
## OPENAI_API_KEY, more flags in LLM_FLAGS (make llm LLM_FLAGS='--model
## llama3.2'); an ingress of llm1 serves it (docs/agent.md, "The LLM example")
llm:
	@mkdir -p '$(DATA)'
	$(GO) run ./examples/llm --deployment-id llm1 --nats-url nats://127.0.0.1:$(NATS_PORT) \
	  --lock-file '$(DATA)/owner-llm1.lock' $(LLM_FLAGS)

## test: formatting, vet, every test with the race detector, then the
## pure packages again without it: their agreement and property tests
## run a smaller sample under -race (internal/testsize.PickRaced) and
## their whole make-test sample here, where it costs a sixth of the CPU.
## The binaries the tests run as processes are built once, first, into a
## directory of this run's own (scripts/testbin.sh; internal/proctest takes
## them from BATON_TEST_BINDIR), not linked again in each test binary that
## runs them; the directory goes when the run ends.
test: fmt-check vet
	@bin=$$(mktemp -d "$${TMPDIR:-/tmp}/baton-testbin.XXXXXX") && trap 'rm -rf "$$bin"' EXIT && \
	echo "GO='$(GO)' ./scripts/testbin.sh $$bin" && GO='$(GO)' ./scripts/testbin.sh "$$bin" && \
	echo "BATON_TEST_BINDIR=$$bin $(GO) test -race -count=1 $(if $(TESTP),-p $(TESTP)) -parallel $(TESTPARALLEL) -timeout 20m $(TESTFLAGS) $(PKGS)" && \
	BATON_TEST_BINDIR="$$bin" $(GO) test -race -count=1 $(if $(TESTP),-p $(TESTP)) -parallel $(TESTPARALLEL) -timeout 20m $(TESTFLAGS) $(PKGS) && \
	echo "BATON_TEST_BINDIR=$$bin $(GO) test -count=1 -timeout 10m $(TESTFLAGS) $(PURE_PKGS)" && \
	BATON_TEST_BINDIR="$$bin" $(GO) test -count=1 -timeout 10m $(TESTFLAGS) $(PURE_PKGS)

## test-upgrade: the mixed-build upgrade test (test/upgrade): real owner and
## ingress processes of this build beside the previous build's
## (internal/oldbuild.Pin, built from this clone's history once into
## $XDG_CACHE_HOME/baton-builds and reused); CI runs it after make test
test-upgrade:
	$(GO) test -race -count=1 -timeout 15m -tags upgrade -v $(TESTFLAGS) ./test/upgrade

## soak: the full sizes the issues name (BATON_SOAK=1), bounded in time
soak:
	@echo "soak: BATON_SOAK=1 go test -race (full sizes; see each test for what it runs)"
	BATON_SOAK=1 $(GO) test -race -count=1 -timeout 60m -v $(PKGS) 2>&1 | grep -E '^(=== RUN|--- |ok|FAIL|PASS|soak:)' 

## bench: BENCH lines, each compared with a raw JetStream baseline from the same run
bench:
	$(GO) run ./cmd/bench

## bench-check: one make bench against docs/bench-reference.txt (ratios,
## each within the tolerance its measured spread sets); not in CI: noisy
## machines. Rebuild the reference deliberately: ten runs, then
## go run ./internal/tools/benchref build run*.txt > docs/bench-reference.txt
bench-check:
	@out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	$(GO) run ./cmd/bench > $$out && cat $$out && \
	$(GO) run ./internal/tools/benchref check docs/bench-reference.txt < $$out

lint: fmt-check vet staticcheck deps sizes docimports apiclient-check

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags upgrade ./test/upgrade

## staticcheck: honnef.co/go/tools at a pinned version, fetched by go run
STATICCHECK_VERSION ?= v0.8.2
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

## deps: the package dependency arrows (scripts/deps.sh)
deps:
	./scripts/deps.sh

## sizes: no file over 600 lines, no function over 80, but for the reasoned
## exceptions in internal/tools/sizes/allow.go
sizes:
	$(GO) run ./internal/tools/sizes

## apiclient-check: test/apiclient/client.gen.go is what oapi-codegen (the
## go.mod tool) generates from docs/openapi.yaml today (go generate
## ./test/apiclient rewrites it)
apiclient-check:
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	cd test/apiclient && sed "s|^output:.*|output: $$tmp/client.gen.go|" oapi-codegen.yaml > $$tmp/config.yaml && \
	$(GO) tool oapi-codegen -config $$tmp/config.yaml ../../docs/openapi.yaml && \
	if ! cmp -s $$tmp/client.gen.go client.gen.go; then \
	  echo "test/apiclient/client.gen.go is stale: run go generate ./test/apiclient"; diff -u client.gen.go $$tmp/client.gen.go | head -40; exit 1; fi

## docimports: a package doc that says what the package imports is true
docimports:
	$(GO) run ./internal/tools/docimports

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

## images: static binaries (owner, ingress, nats-server from go.mod's pin)
## into build/images/<name>/, then FROM-scratch images baton/<name>:$(IMAGE_TAG)
images:
	rm -rf $(IMAGES_DIR)
	mkdir -p $(IMAGES_DIR)/owner $(IMAGES_DIR)/ingress $(IMAGES_DIR)/nats-server
	CGO_ENABLED=0 $(GO) build -ldflags="-s -w $(LDFLAGS)" -o $(IMAGES_DIR)/owner/owner ./cmd/owner
	CGO_ENABLED=0 $(GO) build -ldflags="-s -w $(LDFLAGS)" -o $(IMAGES_DIR)/ingress/ingress ./cmd/ingress
	CGO_ENABLED=0 $(GO) build -ldflags='-s -w' -o $(IMAGES_DIR)/nats-server/nats-server github.com/nats-io/nats-server/v2
	cp deploy/nats/*.conf $(IMAGES_DIR)/nats-server/
	for i in owner ingress nats-server; do \
	  docker build -q -f deploy/docker/$$i.Dockerfile -t baton/$$i:$(IMAGE_TAG) $(IMAGES_DIR)/$$i || exit 1; \
	done

## up / down: the compose stack of compose.yaml (docs/operations.md)
up: compose-check
	$(DC) up -d
	@echo "baton: blue http://127.0.0.1:18081, green http://127.0.0.1:18082, NATS nats://baton:baton@127.0.0.1:14222"

down: compose-check
	$(DC) down -v --remove-orphans -t 10

compose-check:
	@[ -n "$(COMPOSE)" ] || { echo "neither 'docker compose' nor 'docker-compose' found"; exit 1; }

## e2e-smoke: images, the compose stack, a blue→green upgrade of a few
## sessions (cmd/e2e), then the stack down again (always), bounded in time
e2e-smoke: images compose-check
	COMPOSE="$(DC)" GO="$(GO)" ./scripts/e2e-smoke.sh

## e2e: the full rolling upgrade on the compose stack plus
## deploy/compose.e2e.yaml: E2E_SESSIONS (300) sessions under traffic, drain
## report, retire, forced moves, SIGTERM drain, a SIGKILLed owner, a NATS
## node restart and a partitioned owner (cmd/e2e -scenario full), then the
## stack down again (always); ≤ ~8 min. Not in .ci/run.
e2e: images compose-check
	COMPOSE="$(DC) -f deploy/compose.e2e.yaml" GO="$(GO)" ./scripts/e2e.sh

clean:
	rm -rf $(BIN) build
