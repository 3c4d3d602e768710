# mcp-gateway: the two set-up commands are `make run` and `make test`.
GO        ?= go
BIN       := bin
NODE_DIR  := e2e/node
INSPECTOR_DIR := e2e/inspector
CONFORMANCE_DIR := e2e/conformance
STATICCHECK_VERSION := v0.8.2

# What `mcp-gateway version` prints (docs/cli.md); each can be given on the command line.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME ?= $(shell git show -s --format=%cI HEAD 2>/dev/null)
MODIFIED   ?= $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -X github.com/mcp-gateway/mcp-gateway/gateway.Version=$(VERSION) \
	-X main.commit=$(COMMIT) -X main.commitTime=$(COMMIT_TIME) -X main.modified=$(MODIFIED) -X main.buildDate=$(BUILD_DATE)

.PHONY: all build run test unit e2e bench bench-peers lint node-deps clean demo conformance conformance-deps killnine

all: build

# The gateway is built without cgo unless CGO_ENABLED says otherwise: a static binary that maps
# no C library and starts smaller (idle RSS 1.0–1.4 MB lower, docs/benchmarks.md); it uses
# Go's own DNS resolver and user lookup.
build:
	CGO_ENABLED=$(or $(CGO_ENABLED),0) $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/mcp-gateway ./cmd/mcp-gateway
	$(GO) build -o $(BIN)/sim-robot ./cmd/sim-robot

## run: the gateway over HTTP on 127.0.0.1:8080 in front of the simulated robot.
run: build
	./$(BIN)/mcp-gateway serve -c examples/robot.yaml

## test: vet, every benchmark once (so they keep working; figures come from `make bench`), then
## unit tests and end-to-end tests against real MCP peers.
test: node-deps
	$(GO) vet ./...
	$(GO) test -run '^$$' -bench . -benchtime 1x -count=1 ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	# Allocation counts mean nothing under the race detector: checked once without it.
	$(GO) test -count=1 -run Allocations ./internal/strictjson
	# Nor do latencies: the limiter's hit is timed without it too.
	$(GO) test -count=1 -run '^TestAdmitHitLatency$$' ./limits
	# The audit record's encoder writes json.Marshal's bytes whichever encoding/json the
	# toolchain builds: also checked on the one built on encoding/json/v2.
	GOEXPERIMENT=jsonv2 $(GO) test -count=1 -run 'AppendString|AppendFloat|AppendBody|SealWritesWhatMarshalWrites|AppendCallParamsIsMarshal|PlainResult|PlainValue' ./internal/wirejson ./store ./upstream ./gateway

## killnine: the kill -9 suite with 100 kills (`make test` runs it with 10); KILLNINE_SEED=N
## repeats a run's random choices (see docs/benchmarks.md, "Kill -9 suite").
KILLNINE_KILLS ?= 100
killnine: node-deps
	KILLNINE_KILLS=$(KILLNINE_KILLS) $(GO) test -count=1 -timeout 30m -run '^TestKillNine$$' -v ./e2e

# The npm peers of the end-to-end tests, exactly as pinned in package-lock.json; the MCP
# Inspector (with the Node 22 it needs) in a folder of its own.
node-deps: $(NODE_DIR)/node_modules/.package-lock.json $(INSPECTOR_DIR)/node_modules/.package-lock.json

$(NODE_DIR)/node_modules/.package-lock.json: $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && npm ci --no-audit --no-fund

$(INSPECTOR_DIR)/node_modules/.package-lock.json: $(INSPECTOR_DIR)/package.json $(INSPECTOR_DIR)/package-lock.json
	cd $(INSPECTOR_DIR) && npm ci --no-audit --no-fund

## bench: Go benchmarks of the hot paths and the end-to-end hop (see docs/benchmarks.md).
bench: node-deps
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

## bench-peers: the gateway hop side by side with TBXark's ungoverned mcp-proxy and the echo
## server directly, interleaved rounds in one run (issue 17; docs/benchmarks.md). Without
## TBXARK_DIR (a checkout of github.com/TBXark/mcp-proxy) it measures the rest.
BENCH_DIR  ?= ../shared/bench
TBXARK_DIR ?=
ROUNDS     ?= 3
N          ?= 2000
CURVE      ?= 10,100,250,500
TMPFS_DIR  ?= /dev/shm
# UPSTREAM_REVISION: the MCP revision the gateway peers ask the echo server for; unset, the one
# TBXark asks for (2025-11-25); "default" for the gateway's own default, the newest.
UPSTREAM_REVISION ?=
bench-peers:
	$(GO) run ./e2e/benchpeers -bench-dir '$(BENCH_DIR)' -tbxark-dir '$(TBXARK_DIR)' -rounds $(ROUNDS) -n $(N) -curve '$(CURVE)' -tmpfs-dir '$(TMPFS_DIR)' $(if $(UPSTREAM_REVISION),-upstream-revision '$(UPSTREAM_REVISION)')

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above are not formatted"; exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf $(BIN)

## demo: the built-in agent with a scripted model puts the red cup in the drawer of the
## simulated robot (examples/demo.yaml), printing the transcript.
demo: build
	./$(BIN)/mcp-gateway agent -c examples/demo.yaml --task "Put the red cup in the drawer."

## conformance: the official MCP conformance suite (server scenarios) against the Go SDK's
## everything-server directly and through the gateway, and its client scenarios against the Go
## SDK's client and the gateway as a client; fails when the gateway does worse than direct
## (see docs/conformance.md). Tables in e2e/conformance/results/conformance.md.
conformance: build conformance-deps
	$(GO) build -o $(BIN)/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server
	$(GO) build -o $(BIN)/everything-client github.com/modelcontextprotocol/go-sdk/conformance/everything-client
	$(GO) build -o $(BIN)/conformance-client ./$(CONFORMANCE_DIR)/client
	$(GO) build -o $(BIN)/conformance-run ./$(CONFORMANCE_DIR)/run
	./$(BIN)/conformance-run -bin $(BIN) -dir $(CONFORMANCE_DIR) -out $(CONFORMANCE_DIR)/results

# The conformance suites and Node 22 they need, exactly as pinned in their package-lock.json.
conformance-deps: $(CONFORMANCE_DIR)/node_modules/.package-lock.json

$(CONFORMANCE_DIR)/node_modules/.package-lock.json: $(CONFORMANCE_DIR)/package.json $(CONFORMANCE_DIR)/package-lock.json
	cd $(CONFORMANCE_DIR) && npm ci --no-audit --no-fund
