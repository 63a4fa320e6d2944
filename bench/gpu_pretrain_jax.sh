#!/usr/bin/env bash
# BERT-base pre-training step on one GPU with Keras on JAX: tokens per second (all and real, i.e.
# non-padding) and model FLOPs utilization at sequence 128 and 512, mixed_bfloat16: ours (MLM +
# NSP) beside keras-hub's BertMaskedLM, ours on packed rows (4 instances per row, 90-100% real
# tokens) and ELECTRA's pre-trainer (generator 1/4 wide) (bench_pretrain_step.py --preset gpu:
# 32,768 tokens per step, 2 rounds of 10 timed steps after one compiling step each). Under 7
# minutes on an H100 (the timeout stops it at 420 s).
# The last line printed is the results as one JSON object.
#
#   bash bench/gpu_pretrain_jax.sh [more bench_pretrain_step.py flags, e.g. --peak-tflops 989.4]
#
# Needs JAX with CUDA in the venv (PYTHON, default .venv/bin/python), e.g.
#   .venv/bin/pip install "jax[cuda12]==$(.venv/bin/python -c 'import jax; print(jax.__version__)')"
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export KERAS_BACKEND=jax TF_CPP_MIN_LOG_LEVEL=2
"$PYTHON" -c 'import jax; print("devices:", jax.devices())'
exec timeout 420 "$PYTHON" bench/bench_pretrain_step.py --preset gpu "$@"
