# Entry points. Each target creates the virtual environment and installs requirements.txt first
# when they are missing or out of date, so every command works on a fresh clone.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export OMP_NUM_THREADS ?= 1
# Scripts, tests and the grading engine draw into files, never windows. The labs unset it: in a notebook,
# matplotlib's inline backend (the plots under the cells) takes over only when MPLBACKEND is not set.
export MPLBACKEND ?= Agg

# The labs' extra options (e.g. LAB_ARGS="--no-browser --port=8890") and the folder the learner's lab opens.
LAB_ARGS ?=
LAB_DIR  ?= notebooks/
# The learner's lab: its own Jupyter configuration (jupyter-config/learner/) switches nbgrader's instructor
# tools off (menu, Create Assignment, formgrader, Validate, and their server extensions).
LEARNER_JUPYTER := env -u MPLBACKEND JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config/learner$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"
# The wheel's file name from pyproject.toml's name (dashes as underscores) and version: a fork that renames the
# package changes pyproject.toml only.
WHEEL := dist/$(shell sed -n 's/^name = "\(.*\)"/\1/p' pyproject.toml | tr - _)-$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)-py3-none-any.whl

.PHONY: demo test system-deps lab instructor-lab wheel dist build validate lint format clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --editable .
	touch $(STAMP)

## demo: build the course, grade the demo class with the grading engine, print the scores (the main job)
demo: $(STAMP)
	$(PY) -m autograder demo

## test: lint, find or install what the tests need outside Python (system-deps), then the whole test suite
## (what CI runs)
test: lint system-deps
	$(PY) -m pytest

## system-deps: find Debian's chromium and a PostgreSQL server (any version) for the tests; install the
## missing ones with apt-get, or say in one line why it cannot. DRY_RUN=1 only says what it would install.
system-deps:
	@tests/system_deps.sh

## lab: open JupyterLab on the student notebooks, for a learner: plots inline, no instructor tools
lab: $(STAMP)
	$(LEARNER_JUPYTER) $(VENV)/bin/jupyter lab $(LAB_ARGS) $(LAB_DIR)

## instructor-lab: JupyterLab at the course root with nbgrader's tools (formgrader, Create Assignment, ...)
instructor-lab: $(STAMP)
	env -u MPLBACKEND $(VENV)/bin/jupyter lab $(LAB_ARGS)

## wheel: the course's package (autograder, backprop_utils) as dist/*.whl, to publish with notebooks/
wheel: $(WHEEL)

$(WHEEL): $(STAMP) pyproject.toml $(shell find autograder utils -name '*.py')
	rm -rf dist build/lib build/bdist.*
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .
	test -f $@

## dist: the sdist and the wheel of backprop-course, to publish to the package index (docs/instructors.md):
## built as `python -m build --no-isolation` builds them, through setuptools' own build hooks
dist: $(STAMP)
	rm -rf dist build/lib build/bdist.*
	$(PY) -c "from setuptools import build_meta as b; b.build_sdist('dist'); b.build_wheel('dist')"

## build: regenerate the student versions in notebooks/ from solutions/
build: $(STAMP)
	$(PY) -m autograder build

## validate: every solution gets full marks, every student version zero
validate: $(STAMP)
	$(PY) -m autograder validate

## mutation: mutate every reference solution with mutmut, grade each mutant with its check, print the
## kill rate and diagnosis rate per check (minutes; not part of make test). MUTATION_ARGS="01 --baseline"...
.PHONY: mutation
mutation: $(STAMP)
	nice -n 19 $(PY) benchmarks/mutation.py $(MUTATION_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check autograder utils tests solutions benchmarks
	$(VENV)/bin/ruff format --check autograder utils tests solutions benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format autograder utils tests solutions benchmarks
	$(VENV)/bin/ruff check --fix autograder utils tests solutions benchmarks

clean:
	rm -rf build dist course/source course/release .pytest_cache
