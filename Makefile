# Entry points. Each target creates the virtual environment and installs requirements.txt first
# when they are missing or out of date, so every command works on a fresh clone.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export OMP_NUM_THREADS ?= 1
export MPLBACKEND ?= Agg

.PHONY: demo test lab build validate lint format clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

## demo: build the course, grade the demo class with the grading engine, print the scores (the main job)
demo: $(STAMP)
	$(PY) -m autograder demo

## test: lint, then the whole test suite (what CI runs)
test: lint
	$(PY) -m pytest

## lab: open JupyterLab on the student notebooks
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

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
	rm -rf build course/source course/release .pytest_cache
