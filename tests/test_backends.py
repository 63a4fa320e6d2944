"""One set of layers on TensorFlow, JAX and PyTorch: the same `.keras` files give the same outputs
on every installed backend, train there, take Keras' own `quantize("int8")`, and the real
all-MiniLM-L6-v2 through the public loader matches transformers on each of them.

The models are built and saved here (TensorFlow, the test process's backend); each other backend
loads them in its own process (`backend_job.py`), since Keras picks its backend once per process.
Backends that are not installed are skipped (PyTorch: `pip install "torch==2.13.0+cpu"`).
"""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import reference
from backend_job import MODELS
from finetune_cases import TINY

import keras_bert
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.models.task_models import (
    BertClassifier,
    BertMultipleChoice,
    BertSpanLabeler,
    BertTokenClassifier,
)
from keras_bert.testing.real_data import minilm_dir

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "backend_job.py")
OTHER_BACKENDS = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            importlib.util.find_spec(module) is None, reason=f"{module} is not installed"
        ),
    )
    for name, module in (("jax", "jax"), ("torch", "torch"))
]
ATOL = 1e-5  # float32, different kernels, same math.
MINILM_ATOL = 1e-4  # The bar against transformers.
MINILM_TEXTS = ("The cat sat on the mat.", "BERT reads both directions at once, said the paper.")


def _build(work):
    """Saves the tiny models as .keras files and their inputs; returns this backend's outputs."""
    sys.path.insert(0, os.path.dirname(JOB))
    import backend_job

    keras.utils.set_random_seed(7)
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    reference.randomize_weights(encoder, seed=1, scale=0.1)
    models = {
        "encoder": encoder,
        "pretrainer": BertPretrainer(encoder),
        "classifier": BertClassifier(encoder, num_classes=3),
        "mean_classifier": BertClassifier(encoder, num_classes=3, pooling="mean"),
        "span_labeler": BertSpanLabeler(encoder),
        "token_classifier": BertTokenClassifier(encoder, num_classes=4),
        "choices": BertMultipleChoice(encoder),
    }
    rng = np.random.default_rng(0)
    inputs = reference.random_inputs(rng, encoder.config, batch=4, seq=9)
    np.savez(
        os.path.join(work, "inputs.npz"),
        **inputs,
        masked_lm_positions=rng.integers(0, 9, (4, 3)).astype("int32"),
        labels=np.array([0, 1, 2, 1]),
    )
    for name, model in models.items():
        model.save(os.path.join(work, f"{name}.keras"))
    backend_job.main(work)
    return dict(np.load(os.path.join(work, "tensorflow.npz")))


def _transformers_reference(work):
    """all-MiniLM-L6-v2 through transformers (PyTorch): its token ids and outputs; None where the
    model, transformers or torch is missing (transformers v5 runs on PyTorch only)."""
    directory = minilm_dir()
    if directory is None or any(
        importlib.util.find_spec(name) is None for name in ("transformers", "torch")
    ):
        return None
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    batch = tokenizer(list(MINILM_TEXTS), padding=True, return_tensors="pt")
    with torch.no_grad():
        out = transformers.BertModel.from_pretrained(directory).eval()(**batch)
    ids = {
        "input_word_ids": batch["input_ids"].numpy().astype("int32"),
        "input_mask": batch["attention_mask"].numpy().astype("int32"),
        "input_type_ids": batch["token_type_ids"].numpy().astype("int32"),
    }
    np.savez(os.path.join(work, "minilm_ids.npz"), **ids)
    with open(os.path.join(work, "minilm.json"), "w") as f:
        json.dump({"dir": directory}, f)
    mask = ids["input_mask"][..., None].astype(bool)
    return {
        "sequence_output": out.last_hidden_state.numpy(),
        "pooled_output": out.pooler_output.numpy(),
        "mask": mask,
    }


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("backends"))
    minilm = _transformers_reference(work)
    return work, _build(work), minilm


def _run(work, backend):
    env = dict(os.environ, KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, JOB, work], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(os.path.join(work, f"{backend}.npz")))


def _check_minilm(got, minilm):
    if minilm is None:
        return
    mask = minilm["mask"]
    sequence = got["minilm/sequence_output"]
    np.testing.assert_allclose(
        np.where(mask, sequence, 0), np.where(mask, minilm["sequence_output"], 0), atol=MINILM_ATOL
    )
    np.testing.assert_allclose(
        got["minilm/pooled_output"], minilm["pooled_output"], atol=MINILM_ATOL
    )


def test_tensorflow_outputs_match_transformers_and_keras_int8_stays_close(saved):
    work, tf_outputs, minilm = saved
    _check_minilm(tf_outputs, minilm)
    float_logits, int8_logits = tf_outputs["classifier/logits"], tf_outputs["int8/logits"]
    # Before the dense layers were called through __call__, Keras' int8 moved these logits by
    # as much as their own scale (its unscaled int8 kernels were multiplied by hand).
    scale = np.abs(float_logits).max()
    assert np.abs(int8_logits - float_logits).max() < 0.05 * scale
    assert not np.array_equal(int8_logits, float_logits)  # Quantized for real.


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_backend_gives_the_tensorflow_outputs(saved, backend):
    work, want, minilm = saved
    got = _run(work, backend)
    model_keys = [k for k in want if k.split("/")[0] in MODELS]
    assert len(model_keys) >= 6 + 2 * TINY["num_hidden_layers"]
    for key in model_keys:
        np.testing.assert_allclose(got[key], want[key], atol=ATOL, err_msg=key)
    # Trained there: the loss is finite and falls, every trainable weight moved, as on TensorFlow.
    assert np.isfinite(got["fit/loss"]).all() and got["fit/loss"][-1] < got["fit/loss"][0]
    np.testing.assert_allclose(got["fit/loss"], want["fit/loss"], rtol=1e-4)
    np.testing.assert_allclose(got["fit/logits"], want["fit/logits"], atol=1e-4)
    scale = np.abs(want["classifier/logits"]).max()
    assert np.abs(got["int8/logits"] - want["classifier/logits"]).max() < 0.05 * scale
    _check_minilm(got, minilm)
