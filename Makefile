# stigmesh — the two commands that matter: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv test lint typecheck pytest firmware-sitl firmware-test firmware-cross bench demo clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "stigmesh needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

lint: venv
	$(BIN)/ruff check .

typecheck: venv
	$(BIN)/mypy

# Two workers: the slow tests mostly wait on real processes, and one worker left the
# suite over 10 minutes on 2 cores. Each file runs whole on one worker (its module
# fixtures built once). PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 2
pytest: venv
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=12

# The car sketch built for the host (SITL): `stigmesh world --firmware sitl` and the
# tests that run every virtual car as the sketch itself need it.
firmware-sitl:
	$(MAKE) -C firmware sitl

firmware-test:
	$(MAKE) -C firmware test

# Cross-compiles the firmware core for an Xtensa MCU (installs the Debian
# cross-compiler when it can); prints a reason and succeeds where it cannot.
firmware-cross:
	$(MAKE) -C firmware cross

test: lint typecheck firmware-sitl pytest firmware-test firmware-cross

bench: venv
	$(BIN)/stigmesh bench all --json

# The main job: a world with two cars and a moving target, two agents as separate
# processes, a live view, then the summary (logs under runs/).
demo: venv
	$(BIN)/stigmesh demo

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
