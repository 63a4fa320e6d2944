"""The exports' self-checks compare each output on its own scale (`keras_bert.export.checks`):
float noise on a fine-tuned head's logits of several units passes, a weight that did not reload
fails, and the error says by how much and where.

The Hugging Face directories "*_scaled" of tests/checkpoints/hf_tasks are written by transformers
with a fine-tuned model's magnitudes (head weights with a standard deviation of 0.2; logits up to
3.5), see tests/checkpoints/make_hf_task_fixtures.py.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from hf_task_cases import FIXTURES, SEQ_LENGTH, ids
from hf_task_cases import expected as _expected

from keras_bert import export
from keras_bert.export import checks, saved_model


def _ids(answers):
    return {k: tf.constant(v) for k, v in ids(answers).items()}


# === The comparison, against NumPy ===


def test_noise_on_the_outputs_scale_passes_and_a_real_change_fails():
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 2.0, [4, 24, 9]).astype(np.float32)
    logits[0, 0, 0] = 1e-3
    scale = float(np.abs(logits).max())
    # The case: 3.5e-5 on a logit near zero while the logits reach 5.
    noisy = logits + rng.normal(0.0, 1e-6 * scale, logits.shape).astype(np.float32)
    noisy[0, 0, 0] = logits[0, 0, 0] + 3.5e-5
    assert not np.allclose(noisy, logits, atol=1e-5, rtol=1e-4)  # The old check refused it.
    assert checks.difference(noisy, logits) is None
    assert checks.tolerance(logits) == pytest.approx(1e-5 + 1e-4 * scale)

    wrong = logits.copy()
    wrong[2, 5, 3] += 0.05 * scale
    message = checks.difference(wrong, logits)
    assert message is not None
    assert "at [2, 5, 3]" in message and f"{0.05 * scale:.3g}" in message
    assert "1 of 864 values" in message


def test_small_outputs_keep_an_absolute_floor():
    probabilities = np.array([[1e-7, 1.0 - 1e-7]], np.float32)
    assert checks.difference(probabilities + 5e-5, probabilities) is None  # 1e-5 + 1e-4 x 1.
    assert "largest difference" in checks.difference(probabilities + 2e-4, probabilities)


def test_non_finite_values_must_match_and_other_dtypes_be_equal():
    scores = np.array([1.0, -np.inf, 2.0], np.float32)
    assert checks.difference(scores.copy(), scores) is None
    assert "not finite" in checks.difference(np.array([1.0, 0.0, 2.0]), scores)
    assert "not finite" in checks.difference(np.array([1.0, -np.inf, np.nan]), scores)
    assert checks.difference(np.array([b"a", b"b"]), np.array([b"a", b"b"])) is None
    message = checks.difference(np.array([3, 4, 5]), np.array([3, 4, 6]))
    assert "1 of 3 values differ, the first at [2]" in message
    assert "shape (2,)" in checks.difference(np.zeros(2), np.zeros(3))


# === Exports of fine-tuned magnitudes, against transformers ===


@pytest.mark.parametrize(
    "name,outputs",
    [
        ("tokens_scaled", ("logits",)),
        pytest.param("qa_scaled", ("start_logits", "end_logits"), marks=pytest.mark.slow),
        pytest.param("pairs_scaled", ("logits",), marks=pytest.mark.slow),
    ],
)
def test_fine_tuned_magnitudes_export_and_equal_transformers(tmp_path, name, outputs):
    """keras-bert-export's path from a transformers-written directory: the export is not refused,
    and the served `predict_ids` outputs equal transformers' within 1e-4."""
    expected = _expected(name)
    assert max(np.abs(np.asarray(expected[k])).max() for k in outputs) > 1.0
    version = export.export_saved_model(
        os.path.join(FIXTURES, name), str(tmp_path), seq_length=SEQ_LENGTH, warmup_requests=False
    )
    got = tf.saved_model.load(version).signatures["predict_ids"](**_ids(expected))
    for key in outputs:
        np.testing.assert_allclose(got[key].numpy(), expected[key], atol=1e-4, rtol=0)


def test_a_weight_that_did_not_reload_fails_the_export(tmp_path, monkeypatch):
    """One weight zeroed after the SavedModel was written (so the reloaded graph has the old
    value and the reference the new one): the export fails, naming the output and the size of
    the difference, and leaves no version directory."""
    from keras_bert.models.task_models import BertTokenClassifier

    model = BertTokenClassifier.from_preset(
        os.path.join(FIXTURES, "tokens_scaled"), seq_length=SEQ_LENGTH
    )
    (kernel,) = [w for w in model.weights if w.path == "layer_1/output_dense/kernel"]
    save = tf.saved_model.save

    def save_then_zero(*args, **kwargs):
        save(*args, **kwargs)
        kernel.assign(tf.zeros_like(kernel))

    monkeypatch.setattr(saved_model.tf.saved_model, "save", save_then_zero)
    with pytest.raises(AssertionError) as raised:
        export.export_saved_model(model, str(tmp_path), warmup_requests=False)
    message = str(raised.value)
    assert "output logits differs after reloading: largest difference" in message
    largest = float(message.split("largest difference ")[1].split(" ")[0])
    assert largest > 100 * checks.tolerance(np.asarray(_expected("tokens_scaled")["logits"]))
    assert not os.listdir(tmp_path)


def test_quantized_tflite_outputs_near_the_float_ones_on_their_scale():
    """A quantized TFLite model's float outputs must stay within half their largest magnitude
    of TensorFlow's where both are finite (8-bit products move them by a few percent); rows,
    NaN and shapes as before."""
    from keras_bert.export import tflite_runtime

    rng = np.random.default_rng(1)
    want = rng.normal(0.0, 3.0, [8, 2]).astype(np.float32)
    scale = float(np.abs(want).max())
    close = want + rng.uniform(-0.05, 0.05, want.shape).astype(np.float32) * scale
    assert tflite_runtime._quantized_difference(close, want) is None
    scores = np.concatenate([want, np.full([8, 1], -np.inf, np.float32)], 1)
    # Another ranking: the -inf moved.
    ranked = np.concatenate([close, np.zeros([8, 1], np.float32)], 1)
    assert tflite_runtime._quantized_difference(ranked, scores) is None
    garbage = want.copy()
    garbage[3, 1] = want[3, 1] + 0.8 * scale
    assert "at [3, 1]" in tflite_runtime._quantized_difference(garbage, want)
    assert "NaN" in tflite_runtime._quantized_difference(np.full_like(want, np.nan), want)
    assert "7 rows where 8" in tflite_runtime._quantized_difference(want[:7], want)
    assert tflite_runtime._quantized_difference(np.array([b"PER"]), np.array([b"LOC"])) is None
