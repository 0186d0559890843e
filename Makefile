# predbench: `make test` and `make bench` install everything they need on a fresh machine.
SHELL := /bin/bash
PY := .venv/bin/python
APT_PACKAGES := cmake libclang-dev bubblewrap chromium postgresql
STAMP := .venv/.installed

.PHONY: setup test check bench lint perf apt pred versions mutator clean trials

# What `make bench` needs: the packages and pred (cargo-mutants comes with the first mint, or `make mutator`).
setup: apt $(STAMP) pred

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "missing Debian packages; run: sudo apt-get update && sudo apt-get install -y $$missing"; exit 1; \
	  fi; \
	  echo "installing Debian packages: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The default pred version (0.6.0); `versions` every supported one (the tests use both).
pred: $(STAMP)
	$(PY) -m pytest_predbench.verify.setup

versions: $(STAMP)
	$(PY) -m pytest_predbench.verify.setup --all

# cargo-mutants, pinned, for `predbench mint` (installed once into the predbench cache; the first mint
# installs it too, with a notice; the tests mint, so `make test` and `make check` install it first).
mutator: $(STAMP)
	$(PY) -m pytest_predbench.mint.mutator

# Everything, CI included: the fast tier and the end-to-end tests marked `slow`.
test: setup versions mutator
	.venv/bin/ruff check .
	.venv/bin/pytest -n 2 --dist loadgroup

# The fast tier, for development: unit tests, the verifier and the calibration set, no benchmark runs.
check: setup versions mutator
	.venv/bin/ruff check .
	.venv/bin/pytest -n 2 -m "not slow"

# The demo run, then its leaderboard (the report takes the run just made) and what to do next.
bench: setup
	@.venv/bin/pytest bench_sessions -n 2 --models demo/finder,demo/idle; status=$$?; \
	if [ $$status -ne 0 ] && [ $$status -ne 1 ]; then exit $$status; fi; \
	.venv/bin/predbench report || exit $$?; \
	exit $$status

trials: setup
	$(PY) -m tests.support.trials --fake 20 --demo 20

perf: setup
	$(PY) -m benchmarks.run_all

clean:
	rm -rf .venv .pytest_cache reports/*/
