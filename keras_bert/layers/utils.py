"""Small helpers shared by the layers: initializer, activations, id checks."""

import math

import keras
import tensorflow as tf


def initializer(stddev):
    """The truncated-normal initializer of the original code (stddev 0.02)."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def gelu(x):
    """GELU, erf form (the paper; Hugging Face "gelu")."""
    return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


def gelu_tanh(x):
    """GELU, tanh approximation (Hugging Face "gelu_new")."""
    return keras.activations.gelu(x, approximate=True)


# `hidden_act` name -> function; BertConfig validates against these names.
ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_tanh": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": tf.nn.relu,
    "tanh": tf.math.tanh,
    "swish": tf.nn.silu,
    "silu": tf.nn.silu,
}


def activation(name):
    """The activation function for a `BertConfig.hidden_act` name."""
    if name not in ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; known: {sorted(ACTIVATIONS)}.")
    return ACTIVATIONS[name]


def assert_ids_in_range(ids, size, what, limit_name):
    """An op that fails with a message naming `what` if any id is outside [0, size)."""
    ids = tf.convert_to_tensor(ids)
    return tf.debugging.assert_equal(
        tf.reduce_all((ids >= 0) & (ids < size)),
        True,
        message=f"{what} has ids outside [0, {limit_name}={size}).",
    )
