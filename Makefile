# onceflow — build and test entry points.
#
#   make test           vet + gofmt check + the dashboards module + embedded pass (kfake)
#                       + real-broker passes, the guarantee tests under both group
#                       protocols (see PROTOCOL_MATRIX)
#   make test-embedded  vet + gofmt check + the dashboards module + embedded pass only
#   make dashboards     the dashboards module alone: vet and tests (see below)
#   make test-real      real-broker passes only (mandatory: installs Java/Maven if missing):
#                       the suite on a 3-node cluster (node faults included:
#                       TestClusterNodeFaults), then TestBrokerRestart on a
#                       single node (see real-pass below for why)
#   make bench          benchmarks, output in bench.txt (for benchstat)
#   make broker-start / broker-stop / broker-status
#
# Variables: GOTESTFLAGS (extra go test flags, e.g. GOTESTFLAGS='-run TestX -v';
# a -timeout there overrides GOTEST_TIMEOUT), GOTEST_TIMEOUT (15m), KAFKA_PORT
# (9092: the cluster takes KAFKA_PORT..KAFKA_PORT+2*KAFKA_NODES-1, the
# single-node pass the two ports after), KAFKA_NODES (3: nodes of the cluster
# pass and of broker-start; 1 runs the whole real suite on one node),
# KAFKA_STATE_DIR (broker.sh's state dir; the single-node pass uses
# KAFKA_STATE_DIR-single), KAFKA_VERSION (both passes; defaults in
# integration/kafka/broker.sh: 4.4.0 for a cluster, 4.2.0 for one node),
# CI (=true makes the real-broker passes mandatory), KAFKA_SASL_SSL (1: the
# cluster pass's brokers, and broker-start's, also listen SASL_SSL on
# KAFKA_PORT+100.., and the secured pass runs through it; 0: no secured pass).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO             ?= go
GOTESTFLAGS    ?=
GOTEST_TIMEOUT ?= 15m
GOBENCH_TIMEOUT ?= 60m
KAFKA_PORT     ?= 9092
KAFKA_NODES    ?= 3
KAFKA_STATE_DIR ?=
KAFKA_SASL_SSL ?= 1
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

.PHONY: test test-embedded test-real vet fmt-check dashboards embedded-pass real-pass \
	real-skip-banner broker-pass kafka-packages bench broker-start broker-stop broker-status

test: vet fmt-check dashboards embedded-pass
	@$(MAKE) --no-print-directory real-pass REAL_MODE=auto

test-embedded: vet fmt-check dashboards embedded-pass

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

# dashboards/ is a module of its own (its go.mod keeps the Grafana
# Foundation SDK and Prometheus's rule parser out of the library's
# requirements), so ./... above does not reach it: vet it and run its
# tests here. They run a small job on kfake, scrape its /metrics and fail
# if the dashboard (docs/dashboards/onceflow.json) or the alert rules
# (docs/dashboards/onceflow-rules.yml) query a metric it does not export,
# or if the committed JSON is not what `cd dashboards && go generate`
# makes. A few seconds once built. gofmt's check above covers its files.
# Without -race: the module's own code is a generator and a checker, the
# processor it runs is raced in the embedded pass, and the test then reuses
# what vet compiled (the module's requirements differ from the root's, so
# a race build would compile the processor's tree once more: over a
# minute on a loaded CI machine).
dashboards:
	@t0=$$(date +%s); echo "==> dashboards module: go vet ./... && go test -count=1 ./..."; \
	cd dashboards && $(GO) vet ./... && \
	env -u KAFKA_BROKERS $(GO) test -count=1 -timeout $(GOTEST_TIMEOUT) ./...; \
	echo "==> dashboards module: ok in $$(( $$(date +%s) - t0 ))s"

# The guarantee tests run under both group protocols: classic with
# everything else, then KIP-848's consumer protocol
# (ONCEFLOW_GROUP_PROTOCOL=consumer, read by internal/kafkatest): on kfake
# the processor's tests and integration/..., on the cluster the processor's
# tests and the whole reliability suite, node faults included (about 10
# minutes in all; a fresh-clone CI run with it took 23.9-29.0 min on
# 2026-12-02, 35.7 min on 2026-12-07 at 6e2ffd6, embedded tests in parallel).
# PROTOCOL_MATRIX=short, for a quicker local run, keeps only
# the processor's tests on kfake and the reliability suite without its node
# faults on the cluster.
PROTOCOL_MATRIX ?= full
EMBEDDED_848_PKGS := ./processor/ $(if $(filter full,$(PROTOCOL_MATRIX)),./integration/...)
CLUSTER_848_PKGS := $(MODULE)/integration $(if $(filter full,$(PROTOCOL_MATRIX)),$(MODULE)/processor)
CLUSTER_848_SKIP := $(if $(filter full,$(PROTOCOL_MATRIX)),,TestClusterNodeFaults)

embedded-pass:
	@t0=$$(date +%s); \
	echo "==> embedded pass: go test -race -count=1 ./... (kfake, KAFKA_BROKERS unset)"; \
	env -u KAFKA_BROKERS $(GO) test -race -count=1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) ./...; \
	echo "==> embedded pass: ok in $$(( $$(date +%s) - t0 ))s"; \
	t1=$$(date +%s); \
	echo "==> embedded pass, consumer protocol: ONCEFLOW_GROUP_PROTOCOL=consumer go test -race -count=1 $(EMBEDDED_848_PKGS)"; \
	env -u KAFKA_BROKERS ONCEFLOW_GROUP_PROTOCOL=consumer $(GO) test -race -count=1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) $(EMBEDDED_848_PKGS); \
	echo "==> embedded pass, consumer protocol: ok in $$(( $$(date +%s) - t1 ))s"

kafka-packages:
	@$(KAFKA_PKGS_CMD)

# REAL_MODE=auto: skipped (loudly) without java+mvn unless CI=true.
# REAL_MODE=required (test-real, or CI=true): broker.sh installs Java/Maven if
# needed and any failure fails the target.
#
# Two passes, each against brokers it starts and stops itself (unless they
# were already running before, e.g. `make broker-start`):
#  1. the cluster pass: every kafkatest package against a KAFKA_NODES-node
#     cluster (default 3 combined KRaft nodes, RF 3, min.insync.replicas 2:
#     the shape production runs; broker.sh's cluster default is Kafka 4.4.0).
#     KAFKA_BROKER_SCRIPT is set: TestClusterNodeFaults SIGKILLs and
#     restarts one node at a time through it (the leader of the input, the
#     group coordinator, a transaction coordinator, a long outage; about
#     4 min) and TestSoak rotates over the same faults; TestBrokerRestart
#     skips itself there. The network faults (integration TestNet*: each
#     worker behind proxies of its own, no broker change) run here too,
#     about 2 min; under the consumer protocol only the group-coordinator
#     cut (about 15 s). With a mandatory pass (REQUIRED=1) on 3+ nodes
#     ONCEFLOW_REQUIRE_NODE_FAULTS=1 makes TestClusterNodeFaults fail
#     instead of skipping when it finds no cluster or no script.
#  2. the single-node pass, only when KAFKA_NODES > 1: just TestBrokerRestart
#     (./integration) on one node (broker.sh's single default, 4.2.0), on the
#     ports after the cluster's and its own state dir. It SIGKILLs the only
#     broker, so every replica (__transaction_state included) crashes at once
#     and recovers uncleanly: a path a cluster never takes on one node kill,
#     and the one that showed finding 3 (docs/reliability.md). Skipped when
#     GOTESTFLAGS has -run (a developer picking tests; run it with
#     KAFKA_NODES=1 make test-real GOTESTFLAGS='-run TestBrokerRestart').
#     The cluster pass then runs the processor's tests and the reliability
#     suite again under KIP-848's consumer protocol (PASS_848_PKGS; with
#     PROTOCOL_MATRIX=short the reliability suite without
#     TestClusterNodeFaults).
# KAFKA_NODES=1 runs the whole suite in one single-node pass, as before.
#  3. the secured pass, on the cluster pass's brokers right after it
#     (KAFKA_SASL_SSL=1, the default): broker.sh gave them a SASL_SSL
#     listener (throwaway CA, SCRAM-SHA-512 user) beside the PLAINTEXT one,
#     and SECURED_TESTS run through it, their clients configured from
#     `broker.sh secure-env` (KAFKA_TLS_CA, KAFKA_SASL_*): a guarantee test
#     (a crash mid-transaction), a bounded run's crash and rerun, a
#     processor with every client of its own (state, dedupe, position
#     guard, metrics, bounded run), clients without credentials (a clear
#     error, at once), cmd/onceflow describe and an eosbench run of every
#     mode. About 80 s on 3 nodes. Skipped, loudly, on brokers started before
#     without the listener.
REAL_MODE ?= required
SINGLE_PORT := $(shell echo $$(( $(KAFKA_PORT) + 2 * $(KAFKA_NODES) )))
SINGLE_STATE_DIR := $(if $(KAFKA_STATE_DIR),$(KAFKA_STATE_DIR)-single,$(CURDIR)/integration/kafka/.run-single)
real-pass:
	@required=0; \
	if [ "$(REAL_MODE)" = required ] || [ "$${CI:-}" = true ]; then required=1; fi; \
	if [ $$required = 0 ] && ! { command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; }; then \
		$(MAKE) --no-print-directory real-skip-banner WHY="java and/or mvn not installed"; exit 0; \
	fi; \
	pkgs=$$($(KAFKA_PKGS_CMD)); \
	if [ -z "$$pkgs" ]; then \
		echo "==> real-broker pass: no package imports $(KAFKATEST); nothing to run, skipped"; exit 0; \
	fi; \
	t0=$$(date +%s); \
	$(MAKE) --no-print-directory broker-pass REQUIRED=$$required PASS_NODES=$(KAFKA_NODES) \
		PASS_PORT=$(KAFKA_PORT) PASS_STATE_DIR="$(KAFKA_STATE_DIR)" PASS_PKGS="$$(echo $$pkgs)" PASS_RUN= \
		PASS_848_PKGS="$(CLUSTER_848_PKGS)" PASS_SECURED=$(KAFKA_SASL_SSL); \
	if [ "$(KAFKA_NODES)" = 1 ]; then exit 0; fi; \
	case " $(GOTESTFLAGS) " in \
		*" -run "*|*" -run="*|*" --run"*|*" -test.run"*) \
			echo "==> single-node pass (TestBrokerRestart) skipped: GOTESTFLAGS selects tests with -run"; exit 0 ;; \
	esac; \
	$(MAKE) --no-print-directory broker-pass REQUIRED=$$required PASS_NODES=1 \
		PASS_PORT=$(SINGLE_PORT) PASS_STATE_DIR="$(SINGLE_STATE_DIR)" \
		PASS_PKGS=$(MODULE)/integration PASS_RUN=TestBrokerRestart; \
	echo "==> real-broker passes: ok in $$(( $$(date +%s) - t0 ))s"

real-skip-banner:
	@echo; echo "##################################################################"; \
	echo "###  REAL-BROKER PASS SKIPPED: $(WHY)"; \
	echo "###  (the embedded pass ran; run 'make test-real' or set CI=true)"; \
	echo "##################################################################"; echo

# The secured pass's tests (see real-pass) and their packages.
SECURED_TESTS := TestCrashMidTransaction|TestStopAtEndCrashRerun|TestSecuredEveryClient|TestSecuredWithoutCredentials|TestDescribe|TestDescribeSecured|TestSecuredRun
SECURED_PKGS := $(MODULE)/processor $(MODULE)/cmd/onceflow $(MODULE)/cmd/eosbench

# broker-pass: start PASS_NODES nodes (broker.sh) on PASS_PORT with state in
# PASS_STATE_DIR (empty: broker.sh's default), run PASS_PKGS (only the tests
# named by PASS_RUN, a |-separated list of test names, if set), then, with
# PASS_SECURED=1, the secured pass, and stop the brokers on every exit path
# unless they were running before.
broker-pass:
	@export KAFKA_NODES=$(PASS_NODES) KAFKA_PORT=$(PASS_PORT) KAFKA_SASL_SSL=$(if $(PASS_SECURED),$(PASS_SECURED),0); \
	if [ -n "$(PASS_STATE_DIR)" ]; then export KAFKA_STATE_DIR="$(PASS_STATE_DIR)"; fi; \
	if [ "$(PASS_NODES)" = 1 ]; then what="single-node"; else what="$(PASS_NODES)-node cluster"; fi; \
	echo "==> $$what pass packages:"; for p in $(PASS_PKGS); do echo "  $$p"; done; \
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
	echo "==> starting Kafka $$(bash "$(BROKER)" version) ($$what) from 127.0.0.1:$(PASS_PORT)"; \
	if ! addr=$$(bash "$(BROKER)" start); then \
		echo "==> broker start FAILED after $$(( $$(date +%s) - t0 ))s"; \
		if [ "$(REQUIRED)" = 1 ]; then exit 1; fi; \
		$(MAKE) --no-print-directory real-skip-banner WHY="the broker failed to start (see above)"; exit 0; \
	fi; \
	addr=$$(echo "$$addr" | tail -n 1); \
	echo "==> broker $$addr ready in $$(( $$(date +%s) - t0 ))s"; \
	run=(); if [ -n '$(PASS_RUN)' ]; then run=(-run '^($(PASS_RUN))$$'); fi; \
	t1=$$(date +%s); \
	echo "==> $$what pass: KAFKA_BROKERS=$$addr go test -race -count=1 -p 1 $${run[*]} <packages>"; \
	require=; if [ "$(REQUIRED)" = 1 ] && [ "$(PASS_NODES)" -ge 3 ]; then require=1; fi; \
	rc=0; \
	KAFKA_BROKERS="$$addr" KAFKA_BROKER_SCRIPT="$(BROKER)" ONCEFLOW_REQUIRE_NODE_FAULTS="$$require" \
		$(GO) test -race -count=1 -p 1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) "$${run[@]}" $(PASS_PKGS) || rc=$$?; \
	if [ $$rc = 0 ]; then \
		echo "==> $$what pass: ok in $$(( $$(date +%s) - t1 ))s"; \
	else \
		echo "==> $$what pass: FAILED (exit $$rc) after $$(( $$(date +%s) - t1 ))s"; \
	fi; \
	if [ $$rc = 0 ] && [ -n "$(PASS_848_PKGS)" ]; then \
		t2=$$(date +%s); \
		echo "==> $$what pass, consumer protocol: ONCEFLOW_GROUP_PROTOCOL=consumer go test -race -count=1 -p 1 $(PASS_848_PKGS)"; \
		KAFKA_BROKERS="$$addr" KAFKA_BROKER_SCRIPT="$(BROKER)" ONCEFLOW_REQUIRE_NODE_FAULTS="$$require" ONCEFLOW_GROUP_PROTOCOL=consumer \
			$(GO) test -race -count=1 -p 1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) "$${run[@]}" $(if $(CLUSTER_848_SKIP),-skip '^$(CLUSTER_848_SKIP)$$') $(PASS_848_PKGS) || rc=$$?; \
		if [ $$rc = 0 ]; then \
			echo "==> $$what pass, consumer protocol: ok in $$(( $$(date +%s) - t2 ))s"; \
		else \
			echo "==> $$what pass, consumer protocol: FAILED (exit $$rc) after $$(( $$(date +%s) - t2 ))s"; \
		fi; \
	fi; \
	if [ $$rc = 0 ] && [ "$(PASS_SECURED)" = 1 ]; then \
		sec=$$(bash "$(BROKER)" secure-env); \
		case " $(GOTESTFLAGS) " in \
			*" -run "*|*" -run="*|*" --run"*|*" -test.run"*) sec=skip ;; \
		esac; \
		if [ "$$sec" = skip ]; then \
			echo "==> secured pass skipped: GOTESTFLAGS selects tests with -run"; \
		elif [ -z "$$sec" ]; then \
			$(MAKE) --no-print-directory real-skip-banner WHY="secured pass: the running brokers have no SASL_SSL listener (restart them with KAFKA_SASL_SSL=1)"; \
		else \
			eval "$$sec"; t3=$$(date +%s); \
			echo "==> $$what secured pass (SASL_SSL $$KAFKA_SASL_SSL_BROKERS, SCRAM-SHA-512): go test -race -count=1 -p 1 -run '$(SECURED_TESTS)'"; \
			KAFKA_BROKERS="$$KAFKA_SASL_SSL_BROKERS" $(GO) test -race -count=1 -p 1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) \
				-run '^($(SECURED_TESTS))$$' $(SECURED_PKGS) || rc=$$?; \
			if [ $$rc = 0 ]; then \
				echo "==> $$what secured pass: ok in $$(( $$(date +%s) - t3 ))s"; \
			else \
				echo "==> $$what secured pass: FAILED (exit $$rc) after $$(( $$(date +%s) - t3 ))s"; \
			fi; \
		fi; \
	fi; \
	exit $$rc

bench:
	@t0=$$(date +%s); \
	echo "==> go test -run '^$$' -bench . -benchmem -count 6 ./... (output: bench.txt)"; \
	env -u KAFKA_BROKERS $(GO) test -run '^$$' -bench . -benchmem -count 6 -timeout $(GOBENCH_TIMEOUT) $(GOTESTFLAGS) ./... | tee bench.txt; \
	echo "==> bench: done in $$(( $$(date +%s) - t0 ))s"

# broker-start starts KAFKA_NODES nodes (the cluster pass's shape, so the
# cluster pass of a following `make test` reuses them); stop and status act on
# whatever the state dir holds.
broker-start:
	@KAFKA_NODES=$(KAFKA_NODES) KAFKA_SASL_SSL=$(KAFKA_SASL_SSL) bash "$(BROKER)" start

broker-stop:
	@bash "$(BROKER)" stop

broker-status:
	@bash "$(BROKER)" status
