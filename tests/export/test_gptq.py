"""GPTQ rounding of the int8 weights (`keras_bert.export.weight_rounding.gptq`) and its use by
`per_call_int8`."""

import numpy as np
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema

from keras_bert.export import int8_flatbuffer, smoothquant, tflite, weight_rounding


def _nearest(kernel):
    scale = np.abs(kernel).max(axis=1) / 127.0
    return np.clip(np.round(kernel / scale[:, None]), -127, 127), scale


def _obq_reference(kernel, gram, damp=0.01):
    """GPTQ as the sequence of optimal-brain-quantizer steps it computes (Frantar et al. 2022,
    eq. 2-3): round one input channel, spread its error over the channels left by the inverse
    Hessian, then remove the channel from the inverse (a Gaussian elimination step), in the
    order of decreasing diag(H). The package's version reads the same updates off one Cholesky
    factor instead."""
    w = kernel.astype(np.float64).copy()
    scale = np.abs(w).max(axis=1) / 127.0
    h = gram.astype(np.float64).copy()
    h[np.diag_indices_from(h)] += damp * np.mean(np.diag(h))
    inverse = np.linalg.inv(h)
    values = np.zeros(w.shape)
    left = list(np.argsort(-np.diag(gram), kind="stable"))
    while left:
        i, rest = left[0], left[1:]
        values[:, i] = np.clip(np.round(w[:, i] / scale), -127, 127)
        error = (w[:, i] - values[:, i] * scale) / inverse[i, i]
        w[:, rest] -= np.outer(error, inverse[i, rest])
        inverse -= np.outer(inverse[:, i], inverse[i, :]) / inverse[i, i]
        left = rest
    return values, scale


def _correlated_inputs(rng, rows, width, mix=None):
    """Inputs with correlated channels (by `mix`, default random) and a few outlier channels,
    as a BERT layer's."""
    mix = rng.normal(size=(width, width)) * 0.3 + np.eye(width) if mix is None else mix
    x = rng.normal(size=(rows, width)) @ mix
    x[:, :3] *= 8.0
    return x


def test_gptq_matches_the_step_by_step_reference():
    rng = np.random.default_rng(0)
    x = _correlated_inputs(rng, 400, 48)
    kernel = rng.normal(size=(24, 48))
    values, scale = weight_rounding.gptq(kernel, x.T @ x)
    want, want_scale = _obq_reference(kernel, x.T @ x)
    assert values.dtype == np.int8 and scale.dtype == np.float32
    np.testing.assert_allclose(scale, want_scale, rtol=1e-6)
    assert np.mean(values == want) > 0.999, np.mean(values == want)
    assert np.abs(values.astype(int) - want).max() <= 1


def test_gptq_matches_keras_blocked_gptq():
    """A second, independent implementation: Keras' own GPTQ column loop (lazy batch updates in
    blocks of 128, Frantar et al. 2022 section 4), given the same channel order, the same damped
    inverse Hessian's Cholesky factor and our symmetric per-channel grid (levels 0..254 around
    127)."""
    from keras.src.quantizers.gptq import gptq_quantize_matrix  # Keras 3.15 (pinned).

    rng = np.random.default_rng(5)
    x = _correlated_inputs(rng, 2000, 300)
    x[:, 7] = 0.0  # An input that is always 0 (a dead channel).
    kernel = rng.normal(size=(40, 300))
    gram = x.T @ x
    values, scale = weight_rounding.gptq(kernel, gram)
    order = np.argsort(-np.diag(gram), kind="stable")
    h = gram[np.ix_(order, order)]
    h[np.diag(h) == 0, np.diag(h) == 0] = 1.0
    h[np.diag_indices_from(h)] += 0.01 * np.mean(np.diag(h))
    factor = np.linalg.cholesky(np.linalg.inv(h)).T
    grid = np.abs(kernel).max(axis=1, keepdims=True) / 127.0

    def symmetric_grid(weights):
        return (grid.astype(np.float32), np.full_like(grid, 127.0, np.float32), 254.0)

    levels = gptq_quantize_matrix(
        kernel[:, order].astype(np.float32),
        factor.astype(np.float32),
        blocksize=128,
        compute_scale_zero=symmetric_grid,
    )[0]
    want = np.asarray(levels)[:, np.argsort(order)] - 127
    np.testing.assert_allclose(scale, grid[:, 0], rtol=1e-6)
    assert np.mean(values == want) > 0.999, np.mean(values == want)  # float32 against float64
    assert np.abs(values.astype(int) - want).max() <= 1


def test_gptq_of_uncorrelated_inputs_is_rounding_to_nearest():
    """With a diagonal X^T X no channel can absorb another's error: GPTQ rounds to nearest."""
    rng = np.random.default_rng(1)
    kernel = rng.normal(size=(16, 32))
    values, scale = weight_rounding.gptq(kernel, np.diag(rng.uniform(0.5, 4.0, size=32)))
    want, want_scale = _nearest(kernel)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_allclose(scale, want_scale, rtol=1e-6)


def test_gptq_keeps_the_matmul_closer_to_float_than_rounding_to_nearest():
    rng = np.random.default_rng(2)
    kernel = rng.normal(size=(32, 64))
    mix = rng.normal(size=(64, 64)) * 0.3 + np.eye(64)  # Texts of one kind: the same mix.
    calibration, held_out = (_correlated_inputs(rng, 600, 64, mix) for _ in range(2))
    values, scale = weight_rounding.gptq(kernel, calibration.T @ calibration)
    nearest, _ = _nearest(kernel)

    def error(x, steps):
        return np.linalg.norm(x @ (steps * scale[:, None] - kernel).T)

    for x in (calibration, held_out):
        assert error(x, values) < 0.8 * error(x, nearest), (error(x, values), error(x, nearest))


def test_gptq_takes_inputs_that_are_always_zero():
    rng = np.random.default_rng(3)
    x = _correlated_inputs(rng, 200, 16)
    x[:, 5] = 0.0
    values, scale = weight_rounding.gptq(rng.normal(size=(8, 16)), x.T @ x)
    assert np.isfinite(scale).all() and np.abs(values.astype(int)).max() <= 127


def test_per_call_int8_rounds_by_gptq_the_matmuls_it_has_grams_for():
    rng = np.random.default_rng(4)
    kernel = rng.normal(size=(16, 8)).astype(np.float32)  # [in, out], TF's layout.
    x = _correlated_inputs(rng, 300, 16).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
    def f(inputs):
        return {"y": tf.matmul(inputs, kernel)}

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [f.get_concrete_function()], tf.Module()
    )
    flatbuffer = converter.convert()
    sites = smoothquant.matmul_sites(flatbuffer)
    assert list(sites) == ["head"] and len(sites["head"]) == 1
    gram = x.T.astype(np.float64) @ x
    outputs = {}
    cases = (("gptq", {"head": [gram]}), ("nearest", None), ("unmeasured", {"head": [None]}))
    for name, grams in cases:  # An input no calibration text reached is rounded to nearest.
        quantized = int8_flatbuffer.per_call_int8(flatbuffer, grams)
        model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(quantized, 0))
        (weights,) = [t for t in model.subgraphs[0].tensors if t.type == schema.TensorType.INT8]
        stored = np.frombuffer(np.asarray(model.buffers[weights.buffer].data).tobytes(), np.int8)
        want = weight_rounding.gptq(kernel.T, gram)[0] if name == "gptq" else _nearest(kernel.T)[0]
        np.testing.assert_array_equal(stored.reshape(want.shape), want)
        runner = tflite.load_interpreter(model_content=quantized).get_signature_runner()
        outputs[name] = runner(inputs=x)["y"]
    float_y = x @ kernel
    errors = {name: np.linalg.norm(y - float_y) for name, y in outputs.items()}
    assert errors["gptq"] < errors["nearest"], errors


def test_smoothed_grams_are_those_of_the_smoothed_inputs():
    rng = np.random.default_rng(5)
    x, s = rng.normal(size=(50, 6)), rng.uniform(0.5, 3.0, size=6)
    grams = {"qkv": [x.T @ x, None], "head": [x.T @ x]}
    got = smoothquant.smoothed_grams(grams, {"qkv": [s, s]})
    np.testing.assert_allclose(got["qkv"][0], (x / s).T @ (x / s), rtol=1e-10)
    assert got["qkv"][1] is None  # Not measured: stays so.
    np.testing.assert_array_equal(got["head"][0], x.T @ x)  # Not smoothed: its own.
