"""Fake quantization (quantization-aware fine-tuning): numerics against a NumPy transcription of
TFLite's int8 formats, range tracking, checkpoints, and the float path left alone."""

import keras
import numpy as np
import tensorflow as tf
from finetune_cases import TINY

import keras_bert
from keras_bert.models.task_models import BertClassifier
from keras_bert.rewrites import fake_quant
from keras_bert.tasks.quantization_aware import QuantizationAwareTrainer
from keras_bert.tasks.registry import get_task


def numpy_activation(x, low, high):
    """TFLite's asymmetric int8: the range widened to hold 0, scale (high - low) / 255, an
    integer zero point, values clamped to the grid and rounded half up."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / 255.0
    zero_point = np.clip(np.floor(-low / scale + 0.5), 0, 255)  # q = x / scale + zero_point
    q = np.clip(np.floor(x / scale + zero_point + 0.5), 0, 255)
    return (q - zero_point) * scale


def numpy_kernel(w):
    """TFLite's int8 FULLY_CONNECTED weights: symmetric per output channel in [-127, 127]."""
    scale = np.abs(w).max(axis=0) / 127.0  # (out,)
    return np.clip(np.floor(w / scale + 0.5), -127, 127) * scale


def test_activation_fake_quant_equals_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 50)).astype("float32") * 3
    # A range across 0, one beside it (widened to hold 0, as TFLite does), one that clips.
    for low, high in ((-2.5, 4.0), (0.4, 3.0), (-1.0, -0.2), (-0.5, 0.7)):
        got = fake_quant.fake_quant(tf.constant(x), low, high).numpy()
        np.testing.assert_allclose(got, numpy_activation(x, low, high), atol=1e-5)
        assert len(np.unique(got)) <= 256


def test_kernel_fake_quant_equals_numpy_and_is_identity_outside_the_scope():
    w = np.random.default_rng(1).normal(size=(16, 8)).astype("float32")
    w[:, 3] *= 20  # A channel of its own scale.
    ranges = fake_quant.ActivationRanges()
    assert fake_quant.kernel(tf.constant(w)).numpy() is not None
    np.testing.assert_array_equal(fake_quant.kernel(tf.constant(w)).numpy(), w)
    with fake_quant.quantization_aware(ranges):
        got = fake_quant.kernel(tf.constant(w)).numpy()
    np.testing.assert_allclose(got, numpy_kernel(w), atol=1e-6)
    for mode in ("observe", "initialize"):  # The float model: nothing rounded.
        with fake_quant.quantization_aware(ranges, mode):
            np.testing.assert_array_equal(fake_quant.kernel(tf.constant(w)).numpy(), w)


def test_gradient_passes_inside_the_range_only():
    x = tf.constant([-3.0, -0.5, 0.2, 0.9, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(fake_quant.fake_quant(x, -1.0, 1.0))
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0, 1, 1, 1, 0])


def test_ranges_are_the_mean_of_each_examples_min_and_max_then_moving_averages():
    ranges = fake_quant.ActivationRanges(momentum=0.9)
    first = np.array([[[-1.0, 2.0], [0.5, 3.0]], [[-3.0, 1.0], [0.0, 0.0]]], "float32")  # (B, S, H)
    with fake_quant.quantization_aware(ranges, "initialize"):
        out = fake_quant.activation(tf.constant(first), "site", 2)
    np.testing.assert_array_equal(out.numpy(), first)  # Observed, not rounded.
    low, high = (v.numpy() for v in ranges.sites["site"])
    assert (low, high) == ((-1.0 + -3.0) / 2, (3.0 + 1.0) / 2)
    second = np.array([[4.0, -2.0], [0.0, 2.0]], "float32")
    with fake_quant.quantization_aware(ranges, "observe"):
        fake_quant.activation(tf.constant(second), "site", 2)
    np.testing.assert_allclose(
        [v.numpy() for v in ranges.sites["site"]],
        [0.9 * -2.0 + 0.1 * -1.0, 0.9 * 2.0 + 0.1 * 3.0],
        rtol=1e-6,
    )
    # Quantized over the tracked range, not moved. (Not `second`: its 2.0 lies half-way between
    # two grid points of [-1.9, 2.1], where float32 rounding of the range decides.)
    probe = np.array([[4.0, -2.0], [0.0, 1.95]], "float32")
    with fake_quant.quantization_aware(ranges):
        got = fake_quant.activation(tf.constant(probe), "site", 2).numpy()
    np.testing.assert_allclose(got, numpy_activation(probe, -1.9, 2.1), atol=1e-5)
    np.testing.assert_allclose(ranges.sites["site"][0].numpy(), -1.9, rtol=1e-6)


def _classifier(seed):
    keras.utils.set_random_seed(seed)
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    return BertClassifier(encoder, num_classes=2)


def _inputs(seed, batch=3, seq=7):
    ids = np.random.default_rng(seed).integers(1, TINY["vocab_size"], size=(batch, seq))
    mask = np.ones_like(ids)
    mask[0, 5:] = 0
    return {
        "input_word_ids": tf.constant(ids, "int32"),
        "input_mask": tf.constant(mask, "int32"),
        "input_type_ids": tf.zeros_like(tf.constant(ids, "int32")),
    }


def test_trainer_ranges_are_checkpointed_and_restored_by_name(tmp_path):
    task = get_task("sst2", {})
    trainer = QuantizationAwareTrainer(task, _classifier(0))
    trainer.initialize_ranges(_inputs(0))
    sites = dict(trainer.ranges.sites)
    # A site after every op the integer TFLite quantizes: embeddings, each LayerNorm step, the
    # attention's and feed-forward's matrix multiplies and activations, the residual sums.
    assert "embeddings/LayerNorm/variance" in sites and "layer_0/activation" in sites
    assert len(sites) == 2 + 8 + TINY["num_hidden_layers"] * (12 + 2 * 8)
    path = tf.train.Checkpoint(model=trainer).write(str(tmp_path / "ckpt"))
    saved = {name: [v.numpy() for v in pair] for name, pair in sites.items()}

    other = QuantizationAwareTrainer(task, _classifier(0))
    other.initialize_ranges(_inputs(5))  # Other ranges, then the checkpoint's.
    assert any(not np.allclose(saved[n], [v.numpy() for v in other.ranges.sites[n]]) for n in saved)
    tf.train.Checkpoint(model=other).read(path).assert_existing_objects_matched()
    for name, pair in other.ranges.sites.items():
        np.testing.assert_array_equal([v.numpy() for v in pair], saved[name])


def test_float_path_is_unchanged_and_the_scope_changes_the_answers():
    model = _classifier(0)
    inputs = _inputs(1)
    before = model(inputs)["logits"].numpy()
    trainer = QuantizationAwareTrainer(get_task("sst2", {}), model)
    trainer.initialize_ranges(inputs)
    quantized = trainer(inputs, training=False)["logits"].numpy()
    assert not np.allclose(quantized, before, atol=1e-6)  # Rounding happened.
    np.testing.assert_allclose(quantized, before, atol=0.2)  # ... and nothing else.
    np.testing.assert_array_equal(model(inputs)["logits"].numpy(), before)  # Nothing leaks.
    assert not [v for v in model.weights if "range" in v.path]  # The ranges are the trainer's.


def test_training_loss_is_the_float_task_loss_plus_the_quantized_outputs_distance():
    task = get_task("sst2", {})
    trainer = QuantizationAwareTrainer(task, _classifier(0))
    inputs = _inputs(2)
    trainer.initialize_ranges(inputs)
    (labels,) = task.targets({"label": tf.constant([0, 1, 1])})  # The runner's batch labels.
    keras.utils.set_random_seed(3)
    y_pred = trainer(inputs, training=True)
    reference = y_pred["float_outputs"]["logits"].numpy()
    quantized = y_pred["logits"].numpy()
    np.testing.assert_allclose(reference, trainer.model(inputs)["logits"].numpy(), atol=1e-6)
    shifted = reference - reference.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    want = -log_probs[np.arange(3), [0, 1, 1]].mean() + np.mean((quantized - reference) ** 2)
    got = trainer.compute_loss(y=labels, y_pred=y_pred).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)
