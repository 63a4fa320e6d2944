"""Channel groups (the int8_integer_only form of the residual stream and LayerNorm): the grouped
encoder computes the float encoder's outputs, the groups and bounds follow their definitions
(NumPy), and a saturating MINIMUM quantizes to the grid that ends at its bound."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from finetune_cases import TINY
from tensorflow.lite.python import convert as lite_convert
from tensorflow.lite.python import schema_py_generated as schema

import keras_bert
from keras_bert.export import calibration, flatbuffer_edit
from keras_bert.rewrites import channel_groups

OUTLIER, OUTLIER_SIZE = 5, 40.0  # Channel 5 of layer 0's feed-forward output, as MiniLM's 99.


def outlier_encoder():
    """A tiny encoder whose residual stream has one outlier channel from layer 0 on and non-trivial
    LayerNorm parameters."""
    keras.utils.set_random_seed(3)
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    rng = np.random.default_rng(1)
    for weight in encoder.weights:
        if "LayerNorm" in weight.path:
            weight.assign(rng.normal(1.0, 0.5, weight.shape))
    bias = encoder.transformer_layers[0].output_dense.bias
    bias.assign(bias.numpy() + OUTLIER_SIZE * np.eye(bias.shape[0])[OUTLIER])
    return encoder


def inputs(ids, mask=None):
    ids = tf.constant(ids, tf.int32)
    return {
        "input_word_ids": ids,
        "input_mask": tf.ones_like(ids) if mask is None else tf.constant(mask, tf.int32),
        "input_type_ids": tf.zeros_like(ids),
    }


@pytest.fixture(scope="module")
def calibrated():
    encoder = outlier_encoder()
    rng = np.random.default_rng(0)
    texts = [inputs(rng.integers(1, 30, (1, n))) for n in (6, 9, 12, 5, 14, 8)]
    return encoder, channel_groups.calibrate(encoder, texts)


def test_grouped_encoder_computes_the_float_encoder(calibrated):
    encoder, groups = calibrated
    assert len(groups.groups) >= 2 and OUTLIER in groups.groups[-1]  # The outlier apart.
    assert sorted(np.concatenate(groups.groups)) == list(range(TINY["hidden_size"]))
    batch = inputs(
        np.random.default_rng(2).integers(0, 30, (3, 12)),
        [[1] * 12, [1] * 7 + [0] * 5, [1] * 3 + [0] * 9],  # Padding: the mask reaches the blocks.
    )
    want = encoder(batch)
    got = channel_groups.GroupedEncoder(encoder, groups)(batch)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(got[name], want[name], atol=2e-5, err_msg=name)
    for got_layer, want_layer in zip(got["encoder_outputs"], want["encoder_outputs"]):
        np.testing.assert_allclose(got_layer, want_layer, atol=2e-5)
    np.testing.assert_array_equal(encoder(batch)["sequence_output"], want["sequence_output"])


def test_groups_hold_channels_of_similar_range():
    maxima = np.array([[1.0, 1.2, 0.9, 1.1, 5.0, 30.0, 1.0, 300.0]])  # Median 1.15.
    groups = channel_groups.choose_groups(maxima, ratio=4.0, max_groups=4)
    score = maxima[0] / np.median(maxima[0])
    want = [np.flatnonzero((score >= 4.0**k) & (score < 4.0 ** (k + 1))) for k in range(4)]
    want[0], want[3] = np.flatnonzero(score < 4.0), np.flatnonzero(score >= 4.0**3)
    assert [g.tolist() for g in groups] == [w.tolist() for w in want if len(w)]
    assert [g.tolist() for g in groups] == [[0, 1, 2, 3, 6], [4], [5], [7]]
    two = channel_groups.choose_groups(maxima, ratio=4.0, max_groups=2)  # The rest: the last.
    assert [g.tolist() for g in two] == [[0, 1, 2, 3, 6], [4, 5, 7]]


def test_norm_bounds_are_the_percentile_of_the_tokens_variances(calibrated):
    encoder, groups = calibrated
    rng = np.random.default_rng(0)
    texts = [inputs(rng.integers(1, 30, (1, n))) for n in (6, 9, 12, 5, 14, 8)]
    captured = {}
    layer = encoder.transformer_layers[-1].output_layer_norm

    def capture(x):  # The LayerNorm's input, from the plain float encoder.
        captured.setdefault("x", []).append(np.reshape(x, [-1, x.shape[-1]]))
        return original(x)

    original, layer.call = layer.call, capture
    try:
        for x in texts:
            encoder(x)
    finally:
        layer.call = original
    x = np.concatenate(captured["x"]).astype(np.float64)
    centered = x - x.mean(-1, keepdims=True)
    hidden = x.shape[-1]  # Each group's share of the variance:
    per_group = np.stack([(centered[:, g] ** 2).sum(-1) / hidden for g in groups.groups], 1)
    total = per_group.sum(-1)
    bounds = groups.norms[layer.path]
    threshold = np.percentile(total, channel_groups.FINE_QUANTILE)
    np.testing.assert_allclose(bounds.threshold, threshold, rtol=1e-4)
    np.testing.assert_allclose(bounds.bounds, per_group[total < threshold].max(0), rtol=1e-4)


def test_a_minimum_by_a_constant_saturates_its_input_grid():
    """TFLite's quantizer puts MINIMUM's input and output on one grid, the output's: the sums of
    squares saturate at the bound (what `channel_groups.layer_norm`'s levels rely on), values
    below it in steps of bound / 255, however wide the sums' own range."""
    bound = 5.0

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def f(x):
        rows = tf.expand_dims(x, 1)  # (T, 1, 8)
        return {"y": tf.minimum(tf.matmul(rows, rows, transpose_b=True), bound)}

    rng = np.random.default_rng(0)
    samples = [rng.normal(size=(4, 8)).astype(np.float32) for _ in range(16)]
    converter = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([s] for s in samples)
    converter.experimental_mlir_quantizer = True
    converter._experimental_calibrate_only = True
    calibrated = converter.convert()
    model = flatbuffer_edit.model_object(calibrated)
    (minimum,) = _minimums(model)
    graph = model.subgraphs[0]
    sums = [
        i
        for i in minimum.inputs
        if flatbuffer_edit.constant_values(model, graph.tensors[i]) is None
    ]
    # The ranges as the export measures them: the sums 16 times wider than the bound.
    measured = {(0, sums[0]): (0.0, 16 * bound), (0, minimum.outputs[0]): (0.0, bound)}
    quantized = lite_convert.mlir_quantize(calibration.with_ranges(calibrated, measured))
    model = flatbuffer_edit.model_object(quantized)
    (minimum,) = _minimums(model)
    for index in (*minimum.inputs, minimum.outputs[0]):
        scale = float(model.subgraphs[0].tensors[index].quantization.scale[0])
        np.testing.assert_allclose(scale, bound / 255, rtol=0.02)
    interpreter = tf.lite.Interpreter(model_content=quantized)
    x = np.array([[0.3] * 8, [0.5] * 8, [3.0] * 8], np.float32)  # Sums 0.72, 2, 72.
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], x.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    y = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    # Within the input's own rounding (x on its int8 grid); the unsaturated grid steps 16x wider.
    np.testing.assert_allclose(y[:, 0, 0], [0.72, 2.0, bound], atol=0.1)


def _minimums(model):
    graph = model.subgraphs[0]
    return [
        op
        for op in graph.operators
        if flatbuffer_edit.op_builtin(model, op) == schema.BuiltinOperator.MINIMUM
    ]
