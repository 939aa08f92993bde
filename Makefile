# moldau developer entry points. `make run` starts a broker, `make test` runs every test.
# Installs are remembered with stamp files in .venv, redone when pyproject.toml changes.

PYTHON ?= python3
PORT ?= 9092
METRICS_PORT ?= 9644
DATA ?= ./data
# `make test` runs pytest on this many pytest-xdist workers (0 runs them in one process, as plain `pytest` does).
TEST_WORKERS ?= 2
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.stamp-run
TEST_STAMP := $(VENV)/.stamp-test
BENCH_STAMP := $(VENV)/.stamp-bench
# Extra arguments for `python -m bench`, e.g. `make bench BENCH_ARGS=--quick`.
BENCH_ARGS ?=
# Debian packages the tests call (kcat is a real-world client the tests drive; Java runs
# Spark and PostgreSQL stores the activity pipeline's counts in tests/spark; zookeeper is the
# ZooKeeper server the cluster tests start; iproute2 and nftables build and cut the network
# namespaces of the partition tests; chromium and chromium-driver the console's browser tests;
# curl the README's REST Proxy examples).
APT_PACKAGES ?= gcc python3-dev kcat postgresql openjdk-17-jre-headless zookeeper iproute2 nftables chromium chromium-driver curl

# `make run REGISTRY=1 REST=1 CONSOLE=1` (or `make run ALL=1`): also a Schema Registry
# (moldau registry, 127.0.0.1:REGISTRY_PORT), a REST Proxy (moldau rest, REST_PORT, using that
# registry when it runs) and the web console (moldau console, CONSOLE_PORT), each started once
# the broker listens and stopped with it by Ctrl-C.
ALL ?=
REGISTRY ?= $(ALL)
REST ?= $(ALL)
CONSOLE ?= $(ALL)
REGISTRY_PORT ?= 8081
REST_PORT ?= 8082
CONSOLE_PORT ?= 9021
SERVICES_STAMP := $(VENV)/.stamp-services
SERVICES := $(if $(REGISTRY),registry-after-broker) $(if $(REST),rest-after-broker) $(if $(CONSOLE),console-after-broker)

# `make fuzz`: the long wire-fuzz run (tests/fuzz); figures are printed as JSON at the end.
FUZZ_FRAMES ?= 1000000
FUZZ_SECONDS ?= 3600
FUZZ_SEED ?= 1

.PHONY: run registry-after-broker rest-after-broker console-after-broker test test-long-faults lint bench fuzz pipeline verify verify-txn apt-deps clean-venv

run: $(RUN_STAMP) $(if $(strip $(SERVICES)),$(SERVICES_STAMP))
	@for service in $(SERVICES); do $(MAKE) --no-print-directory $$service & done
	$(BIN)/moldau broker --override listeners=PLAINTEXT://127.0.0.1:$(PORT) --override log.dirs=$(DATA) \
		--override metrics.listener=http://127.0.0.1:$(METRICS_PORT)

test: apt-deps $(TEST_STAMP)
	@# pytest exits 5 when it collects no test: an empty suite is not a failure here.
	$(BIN)/pytest -n $(TEST_WORKERS); rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

# Long fault loops (repeated kill -9 of brokers and clients mid-transaction, ...): too slow for
# `make test`, each bounded in count and time.
test-long-faults: apt-deps $(TEST_STAMP)
	$(BIN)/pytest -m long_faults; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

# Mutated frames against a fresh broker until FUZZ_FRAMES or FUZZ_SECONDS, from FUZZ_SEED; fails
# on a crash, a traceback or ERROR line, RSS over 300 MB, or a lost/reordered record.
fuzz: $(TEST_STAMP)
	$(BIN)/python -m tests.fuzz --frames $(FUZZ_FRAMES) --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED)

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# moldau and Tansu side by side (bench/README.md). The peer is downloaded by the harness itself;
# iperf3 measures the loopback limit. Results go to bench/results/ (git-ignored).
bench: APT_PACKAGES = kcat iperf3
bench: export DEBIAN_FRONTEND = noninteractive
bench: $(BENCH_STAMP) apt-deps
	$(BIN)/python -m bench $(BENCH_ARGS)

# The website activity tracking pipeline (Spark) against the broker on $(PORT); when none is
# listening there, one is started in $(DATA) for the length of the run. Ctrl-C stops the
# pipeline first and then that broker: the broker runs in a session of its own (setsid), so
# the terminal's Ctrl-C reaches only the pipeline; this shell ignores it (a no-op trap, which
# children do not inherit), waits for the pipeline to finish its last micro-batch and exit,
# then stops the broker with SIGTERM. A hang-up or SIGTERM also ends in the EXIT trap.
pipeline: apt-deps $(TEST_STAMP)
	@listening() { $(BIN)/python -c "import socket; socket.create_connection(('127.0.0.1', $(PORT)), 1)" 2>/dev/null; }; \
	if listening; then exec $(BIN)/moldau pipeline activity -b 127.0.0.1:$(PORT) $(PIPELINE_ARGS); fi; \
	setsid $(BIN)/moldau broker --override listeners=PLAINTEXT://127.0.0.1:$(PORT) --override log.dirs=$(DATA) & broker=$$!; \
	trap 'kill $$broker 2>/dev/null; wait $$broker' EXIT; trap : INT; trap 'exit 129' HUP; trap 'exit 143' TERM; \
	echo "make pipeline: started a broker (pid $$broker) on 127.0.0.1:$(PORT), data in $(DATA); it stops after the pipeline"; \
	for i in $$(seq 150); do listening && break; kill -0 $$broker 2>/dev/null || exit 1; sleep 0.2; done; \
	$(BIN)/moldau pipeline activity -b 127.0.0.1:$(PORT) $(PIPELINE_ARGS); status=$$?; \
	echo "make pipeline: the pipeline exited ($$status); stopping the broker (pid $$broker)"; \
	kill $$broker 2>/dev/null; wait $$broker; trap - EXIT; exit $$status

# `moldau verify` (docs/architecture.md): against the broker on $(PORT) when one listens there,
# otherwise on a cluster the tool starts itself (ZooKeeper + 3 brokers, in network namespaces
# when root) under its rotate nemesis: kill -9, SIGSTOP, network partitions, SIGTERM, a pause
# past the ZooKeeper session and a ZooKeeper restart, in turn. Bounded by --duration; exit 1
# when anything acknowledged is lost or contradicted. Duplicates and reorderings are reported
# but allowed: the broker writes a retried batch once, but librdkafka re-sends records under a
# new epoch after some failovers (docs/architecture.md, "Idempotent producers").
# VERIFY_ARGS="--unclean --nemesis none" shows a run that must fail.
VERIFY_ARGS ?= --duration 240 --rate 2000
verify: $(RUN_STAMP)
	@if $(BIN)/python -c "import socket; socket.create_connection(('127.0.0.1', $(PORT)), 1)" 2>/dev/null; \
	then $(BIN)/moldau verify -b 127.0.0.1:$(PORT) $(VERIFY_ARGS); \
	else $(BIN)/moldau verify --local-cluster 3 --allow duplicated --allow reordered $(VERIFY_ARGS); fi

# `moldau verify --transactional` the same way: producers write in transactions (a fifth aborted
# on purpose), consumers read with read_committed; aborted reads, lost committed writes,
# duplicates and reorderings all fail the run (a transactional producer does not re-send under
# a new epoch by itself: its failures abort the transaction). Values of transactions left in
# doubt by a fault may be read or not and are only listed.
VERIFY_TXN_ARGS ?= --duration 240 --rate 2000
verify-txn: $(RUN_STAMP)
	@if $(BIN)/python -c "import socket; socket.create_connection(('127.0.0.1', $(PORT)), 1)" 2>/dev/null; \
	then $(BIN)/moldau verify --transactional -b 127.0.0.1:$(PORT) $(VERIFY_TXN_ARGS); \
	else $(BIN)/moldau verify --transactional --local-cluster 3 $(VERIFY_TXN_ARGS); fi

# The venv: Debian's python3 needs python3-venv for ensurepip; install it when we can.
$(BIN)/python:
	@if ! $(PYTHON) -c "import ensurepip, venv" >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update && apt-get install -y python3-venv; \
	  else echo "hint: $(PYTHON) cannot create virtualenvs; install python3-venv (sudo apt-get install python3-venv)" >&2; exit 1; fi; \
	fi
	$(PYTHON) -m venv $(VENV)

# The services of `make run REGISTRY=1 REST=1 CONSOLE=1`: each waits (bounded) for the
# broker's port, then runs in the foreground of its own background make.
WAIT_FOR_BROKER = for i in $$(seq 300); do $(BIN)/python -c "import socket; socket.create_connection(('127.0.0.1', $(PORT)), 1)" 2>/dev/null && break; sleep 0.2; done
registry-after-broker:
	@$(WAIT_FOR_BROKER)
	$(BIN)/moldau registry -b 127.0.0.1:$(PORT) --listen 127.0.0.1:$(REGISTRY_PORT)

rest-after-broker:
	@$(WAIT_FOR_BROKER)
	$(BIN)/moldau rest -b 127.0.0.1:$(PORT) --listen 127.0.0.1:$(REST_PORT) $(if $(REGISTRY),--schema-registry http://127.0.0.1:$(REGISTRY_PORT))

console-after-broker:
	@$(WAIT_FOR_BROKER)
	$(BIN)/moldau console -b 127.0.0.1:$(PORT) --listen 127.0.0.1:$(CONSOLE_PORT) --metrics-url http://127.0.0.1:$(METRICS_PORT)/metrics $(if $(REGISTRY),--schema-registry http://127.0.0.1:$(REGISTRY_PORT))

$(SERVICES_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[registry,rest,console]'
	touch $@

$(RUN_STAMP): pyproject.toml setup.py src/moldau/spark/_kafka_batches.c | $(BIN)/python
	$(BIN)/pip install -e .
	touch $@

$(TEST_STAMP): pyproject.toml setup.py src/moldau/spark/_kafka_batches.c | $(BIN)/python
	$(BIN)/pip install -e ".[test,dev,spark]"
	touch $@ $(RUN_STAMP)

$(BENCH_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e ".[bench]"
	touch $@ $(RUN_STAMP)

# Install missing Debian packages when root; otherwise only say what is missing.
apt-deps:
	@missing=""; for pkg in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update && apt-get install -y $$missing; \
	  else echo "hint: tests need:$$missing (sudo apt-get install$$missing)" >&2; fi; \
	fi

clean-venv:
	rm -rf $(VENV)
