# Baton — see README.md. Every target installs nothing globally.
GO       ?= go
FUZZTIME ?= 15s
PKGS     := ./...
TESTFLAGS ?=

.PHONY: all build run test soak bench lint fmt-check vet deps fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o bin/owner ./cmd/owner
	CGO_ENABLED=0 $(GO) build -o bin/ingress ./cmd/ingress

## run: embedded NATS (JetStream, store ./data) + an owner pool + an ingress on :8080
run: build
	./scripts/run.sh

## test: formatting, vet, and every test with the race detector
test: fmt-check vet
	$(GO) test -race -count=1 -timeout 20m $(TESTFLAGS) $(PKGS)

## soak: the full sizes the issues name (BATON_SOAK=1), bounded in time
soak:
	@echo "soak: BATON_SOAK=1 go test -race (full sizes; see each test for what it runs)"
	BATON_SOAK=1 $(GO) test -race -count=1 -timeout 60m -v $(PKGS) 2>&1 | grep -E '^(=== RUN|--- |ok|FAIL|PASS|soak:)' 

## bench: BENCH lines, each compared with a raw JetStream baseline from the same run
bench:
	$(GO) run ./cmd/bench

lint: fmt-check vet deps

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

## deps: the dependency arrows of DESIGN.md §2
deps:
	./scripts/deps.sh

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf bin
