# The two commands of the README. Everything else here serves them.
#   make demo   run the console on its embedded default (SQLite file, embedded broker; no services)
#   make test   run the whole suite on PostgreSQL + Redis (+ a real browser)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The stamp names both packages' pyproject.toml: a change to either reinstalls.
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml cli/pyproject.toml | sha1sum | cut -c1-12)

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test install lint clean bench bench-slurm bench-fleet-scale bench-k8s-watch

$(STAMP): pyproject.toml cli/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet -e ./cli
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	exec env DEBUG=1 $(BIN)/python manage.py demo

# Test services: PostgreSQL and Redis on 127.0.0.1 (CI has them running; scripts/test-services.sh
# starts them when it can, or says exactly what is missing). Chromium comes from Debian's packages. The Slurm
# tests run against a real local Slurm cluster that scripts/with-slurm.sh starts (apt) and stops around pytest.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/console
TEST_REDIS_URL    ?= redis://127.0.0.1:6379/15
# Two processes (pytest-xdist; the machines have two cores); `PYTEST_ARGS=-n 0` runs the suite in one. Every
# run lists its slowest tests: CI must stay under 30 minutes, and this is where the time goes.
PYTEST_ARGS       ?= -n 2 --dist loadgroup --durations=25

test: $(STAMP)
	scripts/test-services.sh
	scripts/ensure-chromium.sh
	scripts/ensure-gettext.sh
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_REDIS_URL) SECRET_KEY=test-only-secret \
		scripts/with-slurm.sh $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports --no-cache

clean:
	rm -rf var .pytest_cache .ruff_cache test-artifacts

# Benchmarks (not part of the test run); results are written down in bench/README.md.
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/console_bench
# The overview benchmark rebuilds its fleet, tenants and spend from scratch: a database of its own.
OVERVIEW_BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/console_ov_bench

bench: $(STAMP)
	DATABASE_URL=$(BENCH_DATABASE_URL) SECRET_KEY=bench-only $(BIN)/python bench/fleet_bench.py
	DATABASE_URL=$(BENCH_DATABASE_URL) SECRET_KEY=bench-only $(BIN)/python bench/admission_bench.py
	DATABASE_URL=$(BENCH_DATABASE_URL) SECRET_KEY=bench-only $(BIN)/python bench/k8s_inventory_bench.py  # includes the watch rounds
	$(BIN)/python bench/render_bench.py
	DATABASE_URL=$(BENCH_DATABASE_URL) SECRET_KEY=bench-only $(BIN)/python bench/submit_bench.py
	DATABASE_URL=$(OVERVIEW_BENCH_DATABASE_URL) SECRET_KEY=bench-only $(BIN)/python bench/overview_bench.py
	$(MAKE) bench-slurm
	$(MAKE) bench-fleet-scale

# Slurm submission against bare sbatch, and the chaos run (issue 23 parts 3 and 7), on the real local cluster:
# shared, so one user at a time (/tmp/slurm.lock); started around the run unless it is up already.
SLURM_BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/console_slurm_bench
bench-slurm: $(STAMP)
	flock /tmp/slurm.lock scripts/with-slurm.sh env DATABASE_URL=$(SLURM_BENCH_DATABASE_URL) SECRET_KEY=bench-only \
		CELERY_BROKER_URL=redis://127.0.0.1:6379/12 \
		sh -c '$(BIN)/python bench/slurm_bench.py && $(BIN)/python bench/slurm_chaos_bench.py'

# Issue 23 parts 1 and 2: XID to cordon (the cycle's own part, then end to end through a real worker at a 5 s
# scrape), and ten clusters on two Celery workers. Each rebuilds its fleet: databases of their own. They start
# Celery workers and beat on BENCH_BROKER_URL (its queues are purged: a Redis database nobody else uses).
FLEET_SCALE_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/console_fleet_scale
CORDON_BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/console_cordon_bench
BENCH_BROKER_URL ?= redis://127.0.0.1:6379/11

bench-fleet-scale: $(STAMP)
	DATABASE_URL=$(CORDON_BENCH_DATABASE_URL) CELERY_BROKER_URL=memory:// SECRET_KEY=bench-only \
		$(BIN)/python bench/cordon_bench.py
	HEALTH_SCRAPE_INTERVAL_S=5 DATABASE_URL=$(CORDON_BENCH_DATABASE_URL) CELERY_BROKER_URL=$(BENCH_BROKER_URL) \
		SECRET_KEY=bench-only $(BIN)/python bench/health_latency_bench.py
	DATABASE_URL=$(FLEET_SCALE_DATABASE_URL) CELERY_BROKER_URL=$(BENCH_BROKER_URL) SECRET_KEY=bench-only \
		$(BIN)/python bench/fleet_scale_bench.py


# Issue 23 part 6 alone: Kubernetes inventory by watch against its floors (the same rounds `bench` runs).
bench-k8s-watch: $(STAMP)
	BENCH_ONLY=watch DATABASE_URL=$(BENCH_DATABASE_URL) SECRET_KEY=bench-only $(BIN)/python bench/k8s_inventory_bench.py
