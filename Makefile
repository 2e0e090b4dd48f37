# soak: `make demo` runs a short real soak and writes its report; `make test`
# runs ruff, mypy and the tests. Both install what they need first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup system-deps docker-ready lint typecheck test test-unit demo bench bench-load \
	bench-sinks bench-targets bench-service bench-agents clean test-upgrades refdns demo-leak agent-image

# The demo needs soak only; the tools of `make test` (pytest, ruff, mypy, import-linter)
# come with `setup`. The venv's own pip installs both (no upgrade: it took seconds of a
# first `make demo`).
$(BIN)/soak: pyproject.toml src/soak/load/_fastudp.c src/soak/load/_fastudp_defs.h src/soak/load/_fastudp_loop.h \
		src/soak/load/_fastengine.h src/soak/load/_fastface.h src/soak/load/_fastconn.h src/soak/load/_faststream.c src/soak/load/_faststream_conn.h \
		src/soak/load/_faststream_churn.h src/soak/load/_faststream_face.h src/soak/load/_fastchurn.h \
		src/soak/load/_fastdoh.c src/soak/load/_fastdoh_defs.h src/soak/load/_fastdoh_h2.h \
		src/soak/load/_fastdoh_conn.h src/soak/load/_fastdoh_loop.h src/soak/load/_fastdoh_face.h \
		src/soak/load/replay/_fastreplay.c src/soak/load/replay/_fastreplay_face.h \
		src/soak/load/replay/_fastreplay_play.h src/soak/load/replay/_fastreplay_send.h src/soak/load/replay/_fastreplay_offsets.h \
		src/soak/load/replay/_fastreplay_stream_common.h src/soak/load/replay/_fastreplay_step.h \
		src/soak/load/replay/_fastreplay_stream.c src/soak/load/replay/_fastreplay_stream_face.h \
		src/soak/load/replay/_fastreplay_doh.c src/soak/load/replay/_fastreplay_doh_face.h
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e .
	touch $@

$(BIN)/pytest: $(BIN)/soak
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/pytest

system-deps:
	bash scripts/install-system-deps.sh

# The reference Go DNS server (testbed/refdns) from Debian's Go packages, offline.
refdns: system-deps
	bash scripts/build-refdns.sh

# Docker engine and the local test images (no registry is reachable).
docker-ready: system-deps
	bash scripts/start-dockerd.sh
	bash scripts/build-test-images.sh

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_module_size.py src tests
	$(BIN)/python scripts/check_test_duplicates.py --max-pairs 10 --folder tests

typecheck: setup
	$(BIN)/mypy

# The load agent's image (docs/scale.md), offline: the project's wheels built here, installed
# into the local Debian base image.
agent-image: setup docker-ready
	bash scripts/build-agent-image.sh

test-unit: setup
	$(BIN)/pytest -q tests/unit

test: system-deps setup lint typecheck docker-ready refdns agent-image
	$(BIN)/pytest -q --durations=30 -n 2 --dist loadgroup -m "not upgrades" tests

# Real-version upgrades (pdns 4.4 -> 4.7 -> 4.9 ...): builds the versioned images, then
# runs the tests marked `upgrades` (`make test` leaves them out).
test-upgrades: setup docker-ready
	bash scripts/build-test-images.sh upgrades
	$(BIN)/pytest -q -m upgrades tests

# Only what the demo uses is installed (scripts/install-system-deps.sh demo); refdns
# builds (CPU) while pip installs soak (mostly waiting on downloads): on a fresh machine
# each takes about half a minute.
DEMO_BUILD = bash scripts/build-refdns.sh & build=$$!; \
	$(MAKE) --no-print-directory $(BIN)/soak; installed=$$?; \
	wait $$build && exit $$installed

demo:
	bash scripts/install-system-deps.sh demo
	$(DEMO_BUILD)
	bash scripts/demo.sh

# The same with refdns -leak: `growing` verdicts and the alert in a local Alertmanager.
demo-leak:
	bash scripts/install-system-deps.sh demo-leak
	$(DEMO_BUILD)
	SOAK_DEMO_LEAK=1 bash scripts/demo.sh

# Benchmarks print ratios against a named peer; figures go in docs/benchmarks.md.
# `make bench` runs the short ones; bench-service is a 30-minute soak of the service.
bench: bench-load bench-sinks bench-targets

bench-load: system-deps setup
	$(BIN)/python bench/load_vs_dnsperf.py

bench-sinks: system-deps setup
	$(BIN)/python bench/sinks.py

bench-targets: docker-ready setup
	$(BIN)/python bench/targets_ready.py

# Needs an active swarm on this engine (it never creates or leaves one).
bench-agents: docker-ready setup agent-image
	$(BIN)/python bench/agents_vs_dnsperf.py

bench-service: system-deps setup
	$(BIN)/python bench/service_soak.py --minutes 30

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
