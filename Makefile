# onceflow — build and test entry points.
#
#   make test           vet + gofmt check + embedded pass (kfake) + real-broker pass
#   make test-embedded  vet + gofmt check + embedded pass only
#   make test-real      real-broker pass only (mandatory: installs Java/Maven if missing)
#   make bench          benchmarks, output in bench.txt (for benchstat)
#   make broker-start / broker-stop
#
# Variables: GOTESTFLAGS (extra go test flags, e.g. GOTESTFLAGS='-run TestX -v';
# a -timeout there overrides GOTEST_TIMEOUT), GOTEST_TIMEOUT (15m), KAFKA_PORT
# (9092), KAFKA_VERSION (see integration/kafka/broker.sh), CI (=true makes the
# real-broker pass mandatory).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO             ?= go
GOTESTFLAGS    ?=
GOTEST_TIMEOUT ?= 15m
GOBENCH_TIMEOUT ?= 60m
KAFKA_PORT     ?= 9092
export KAFKA_PORT

MODULE   := github.com/onceflow/onceflow
KAFKATEST := $(MODULE)/internal/kafkatest
BROKER   := $(CURDIR)/integration/kafka/broker.sh

# Packages for the real-broker pass: every package whose own imports, in-package
# test imports or external (_test package) imports include internal/kafkatest.
# `go list -e` keeps going past packages that do not compile (go test reports them).
KAFKA_PKGS_CMD = $(GO) list -e -f '{{.ImportPath}} {{.Imports}} {{.TestImports}} {{.XTestImports}}' ./... \
	| tr -d '[]' \
	| awk -v k='$(KAFKATEST)' '{ for (i = 2; i <= NF; i++) if ($$i == k) { print $$1; next } }'

.PHONY: test test-embedded test-real vet fmt-check embedded-pass real-pass \
	kafka-packages bench broker-start broker-stop broker-status

test: vet fmt-check embedded-pass
	@$(MAKE) --no-print-directory real-pass REAL_MODE=auto

test-embedded: vet fmt-check embedded-pass

test-real:
	@$(MAKE) --no-print-directory real-pass REAL_MODE=required

vet:
	@t0=$$(date +%s); echo "==> go vet ./..."; \
	$(GO) vet ./...; \
	echo "==> go vet: ok in $$(( $$(date +%s) - t0 ))s"

fmt-check:
	@echo "==> gofmt check"; \
	files=$$(find . -name '*.go' -not -path './.git/*' -not -path './vendor/*' \
		-not -path '*/testdata/*' -not -path './integration/kafka/.cache/*' -print); \
	bad=""; \
	if [ -n "$$files" ]; then bad=$$(gofmt -l $$files); fi; \
	if [ -n "$$bad" ]; then \
		echo "gofmt: these files are not formatted (run gofmt -w):"; \
		echo "$$bad" | sed 's/^/  /'; \
		exit 1; \
	fi; \
	echo "==> gofmt: ok"

embedded-pass:
	@t0=$$(date +%s); \
	echo "==> embedded pass: go test -race -count=1 ./... (kfake, KAFKA_BROKERS unset)"; \
	env -u KAFKA_BROKERS $(GO) test -race -count=1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) ./...; \
	echo "==> embedded pass: ok in $$(( $$(date +%s) - t0 ))s"

kafka-packages:
	@$(KAFKA_PKGS_CMD)

# REAL_MODE=auto: skipped (loudly) without java+mvn unless CI=true.
# REAL_MODE=required (test-real, or CI=true): broker.sh installs Java/Maven if
# needed and any failure fails the target. The broker is stopped on every exit
# path unless it was already running before (e.g. `make broker-start`).
REAL_MODE ?= required
real-pass:
	@required=0; \
	if [ "$(REAL_MODE)" = required ] || [ "$${CI:-}" = true ]; then required=1; fi; \
	banner() { \
		echo; echo "##################################################################"; \
		echo "###  REAL-BROKER PASS SKIPPED: $$1"; \
		echo "###  (the embedded pass ran; run 'make test-real' or set CI=true)"; \
		echo "##################################################################"; echo; \
	}; \
	if [ $$required = 0 ] && ! { command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; }; then \
		banner "java and/or mvn not installed"; exit 0; \
	fi; \
	pkgs=$$($(KAFKA_PKGS_CMD)); \
	if [ -z "$$pkgs" ]; then \
		echo "==> real-broker pass: no package imports $(KAFKATEST); nothing to run, skipped"; exit 0; \
	fi; \
	echo "==> real-broker pass packages:"; echo "$$pkgs" | sed 's/^/  /'; \
	owned=1; \
	if bash "$(BROKER)" status >/dev/null 2>&1; then owned=0; echo "==> broker already running; using it and leaving it running"; fi; \
	cleanup() { \
		if [ $$owned = 1 ]; then \
			t=$$(date +%s); bash "$(BROKER)" stop || true; \
			echo "==> broker stop took $$(( $$(date +%s) - t ))s"; \
		fi; \
	}; \
	trap cleanup EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	t0=$$(date +%s); \
	echo "==> starting Kafka $$(bash "$(BROKER)" version) on 127.0.0.1:$(KAFKA_PORT)"; \
	if ! addr=$$(bash "$(BROKER)" start); then \
		echo "==> broker start FAILED after $$(( $$(date +%s) - t0 ))s"; \
		if [ $$required = 1 ]; then exit 1; fi; \
		banner "the broker failed to start (see above)"; exit 0; \
	fi; \
	addr=$$(echo "$$addr" | tail -n 1); \
	echo "==> broker $$addr ready in $$(( $$(date +%s) - t0 ))s"; \
	t1=$$(date +%s); \
	echo "==> real-broker pass: KAFKA_BROKERS=$$addr go test -race -count=1 -p 1 <kafka packages>"; \
	rc=0; \
	KAFKA_BROKERS="$$addr" KAFKA_BROKER_SCRIPT="$(BROKER)" \
		$(GO) test -race -count=1 -p 1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) $$pkgs || rc=$$?; \
	if [ $$rc = 0 ]; then \
		echo "==> real-broker pass: ok in $$(( $$(date +%s) - t1 ))s"; \
	else \
		echo "==> real-broker pass: FAILED (exit $$rc) after $$(( $$(date +%s) - t1 ))s"; \
	fi; \
	exit $$rc

bench:
	@t0=$$(date +%s); \
	echo "==> go test -run '^$$' -bench . -benchmem -count 6 ./... (output: bench.txt)"; \
	env -u KAFKA_BROKERS $(GO) test -run '^$$' -bench . -benchmem -count 6 -timeout $(GOBENCH_TIMEOUT) $(GOTESTFLAGS) ./... | tee bench.txt; \
	echo "==> bench: done in $$(( $$(date +%s) - t0 ))s"

broker-start:
	@bash "$(BROKER)" start

broker-stop:
	@bash "$(BROKER)" stop

broker-status:
	@bash "$(BROKER)" status
