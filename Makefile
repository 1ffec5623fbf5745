# Two commands on a fresh machine (Python 3.10+ with pip); each sets up what it needs, once:
#   make demo   migrate the tiny demo VLM this project builds itself (the main job)
#   make test   lint, then tier 1 and tier 2 (tier 2 on the vendored MindSpeed-MM where present)
# More: make test-all (every family through the real trainer), make test-torch27 (the users'
# torch 2.7.1, where MindSpeed-MM's own fully_shard patch runs), make test-tf5 (transformers 5.2.0 in
# the training interpreter, as MindSpeed-MM's newest examples install), make clean.

PYTHON   ?= python3
VENV     ?= .venv
# torch 2.13.0 is a CPU wheel on this project's machines. torchvision 0.28.0 from the index is a
# CUDA build; hooks/compat.py and the trainer's CPU bridge make it importable on CPU-only torch.
TORCH    ?= torch==2.13.0 torchvision==0.28.0
VENV_27  ?= .venv-torch27
TORCH_27 ?= torch==2.7.1 torchvision==0.22.1
VENV_TF5 ?= .venv-tf5
TRANSFORMERS_5 ?= transformers==5.2.0
PYTEST_ARGS ?=

PY       := $(VENV)/bin/python
PIP_FLAGS := --quiet --disable-pip-version-check
# The venv first on PATH, as in an activated venv: copier's default interpreter answer is "python3".
WITH_FRAMEWORK := PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m tests.framework_snapshots --

.PHONY: demo test test-all test-torch27 test-tf5 clean

$(VENV)/.installed: requirements.txt requirements-framework.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) $(TORCH) -r requirements-framework.txt
	touch $@

$(VENV_27)/.installed: requirements.txt requirements-framework.txt
	$(PYTHON) -m venv $(VENV_27)
	$(VENV_27)/bin/python -m pip install $(PIP_FLAGS) $(TORCH_27) -r requirements-framework.txt
	touch $@

# The same requirements with transformers 5 (the hooks' own environment, .venv, stays on 4.57.1).
$(VENV_TF5)/.installed: requirements.txt requirements-framework.txt
	mkdir -p build
	sed 's/^transformers==.*/$(TRANSFORMERS_5)/' requirements.txt > build/requirements-tf5.txt
	sed 's/^-r requirements.txt/-r requirements-tf5.txt/' requirements-framework.txt > build/requirements-framework-tf5.txt
	$(PYTHON) -m venv $(VENV_TF5)
	$(VENV_TF5)/bin/python -m pip install $(PIP_FLAGS) $(TORCH) -r build/requirements-framework-tf5.txt
	touch $@

demo: $(VENV)/.installed
	$(WITH_FRAMEWORK) $(PY) -m hooks.demo

test: $(VENV)/.installed
	$(PY) -m ruff check hooks tests
	$(WITH_FRAMEWORK) $(PY) -m pytest $(PYTEST_ARGS)

test-all: PYTEST_ARGS += --full-matrix
test-all: test

# copier and pytest stay in $(VENV); the probe, parity and smoke run in the torch 2.7.1 interpreter.
test-torch27: $(VENV)/.installed $(VENV_27)/.installed
	MSMM_TORCH27_PYTHON=$(abspath $(VENV_27))/bin/python $(WITH_FRAMEWORK) $(PY) -m pytest -m torch27 $(PYTEST_ARGS)

# copier and pytest stay in $(VENV); tiny builds, probe, parity and smoke run with transformers 5.
test-tf5: $(VENV)/.installed $(VENV_TF5)/.installed
	MSMM_TF5_PYTHON=$(abspath $(VENV_TF5))/bin/python $(WITH_FRAMEWORK) $(PY) -m pytest -m tf5 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(VENV_27) $(VENV_TF5) build
