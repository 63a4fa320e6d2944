"""MaskedMeanPooling: the mean over non-padding tokens, against NumPy; float32 under mixed
precision; a row without tokens gives zeros; config round trip."""

import keras
import numpy as np

from keras_bert.layers.pooling import MaskedMeanPooling


def _numpy_mean(sequence, mask):
    """Each row's mean over the positions where mask is 1 (a loop: no shared formula)."""
    out = np.zeros(sequence.shape[::2], np.float64)  # (B, H)
    for b in range(sequence.shape[0]):
        tokens = [sequence[b, s] for s in range(sequence.shape[1]) if mask[b, s]]
        if tokens:
            out[b] = np.mean(tokens, axis=0)
    return out


def test_mean_over_tokens_against_numpy():
    rng = np.random.default_rng(0)
    sequence = rng.normal(size=(4, 7, 5)).astype(np.float32)  # (B, S, H)
    sequence[:, 5:] += 100.0  # Padding positions hold large values: they must not count.
    mask = np.array([[1] * 7, [1] * 5 + [0] * 2, [1, 1, 0, 0, 0, 0, 0], [0] * 7], np.int32)
    got = np.asarray(MaskedMeanPooling()(sequence, mask))
    np.testing.assert_allclose(got, _numpy_mean(sequence, mask), atol=1e-5)
    assert np.all(got[3] == 0)  # No tokens: zeros, not NaN.
    np.testing.assert_allclose(  # A boolean mask pools the same.
        np.asarray(MaskedMeanPooling()(sequence, mask.astype(bool))), got, atol=1e-6
    )


def test_float32_from_half_precision_and_config_round_trip():
    sequence = np.full((2, 300, 3), 300.0, np.float16)  # A float16 sum would overflow (> 65504).
    mask = np.ones((2, 300), np.int32)
    layer = MaskedMeanPooling(name="pool")
    got = layer(sequence, mask)
    assert keras.backend.standardize_dtype(got.dtype) == "float32"
    np.testing.assert_allclose(np.asarray(got), 300.0)
    again = MaskedMeanPooling.from_config(layer.get_config())
    assert again.name == "pool" and again.dtype_policy.compute_dtype == "float32"
