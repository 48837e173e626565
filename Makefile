# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: demo test lint bench bench-full proto docs install dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kubedevice demo

# Two worker processes (pytest-xdist), each taking whole files, so that a module's one daemon serves all its
# tests: half the time on 2 cores, as most tests wait on processes and sockets. Fixed rather than `auto`: a
# container limited to 2 cores may report many more. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/mypy --strict src

# Every scenario once at the sizes README.md quotes (a minute or two); bench-full: every scale target, three
# runs per figure (many minutes).
bench: $(STAMP)
	$(BIN)/python -m bench

bench-full: $(STAMP)
	$(BIN)/python -m bench --full

proto: $(STAMP)
	$(BIN)/python tools/gen_proto.py

# docs/sdk.md from the plugin SDK's docstrings; a test checks the committed page is a fresh render.
docs: $(STAMP)
	$(BIN)/python tools/gen_sdk_doc.py

# The sdist and the wheel into dist/ (`pip install dist/kubedevice-*.whl` anywhere). Built without
# isolation: with the venv's setuptools, which the test extras keep at what build-system requires, so it
# needs no index and takes seconds; the wheel is built from the sdist, which proves the sdist complete.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
