"""Small helpers shared by the layers: initializer, activations."""

import math

import keras
from keras import ops


def initializer(stddev):
    """The truncated-normal initializer of the original code (stddev 0.02)."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def gelu(x):
    """GELU, erf form (the paper; Hugging Face "gelu")."""
    return 0.5 * x * (1.0 + ops.erf(x / ops.cast(math.sqrt(2.0), x.dtype)))


def gelu_tanh(x):
    """GELU, tanh approximation (Hugging Face "gelu_new")."""
    return keras.activations.gelu(x, approximate=True)


# `hidden_act` name -> function; BertConfig validates against these names.
ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_tanh": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": keras.activations.relu,
    "tanh": ops.tanh,
    "swish": keras.activations.silu,
    "silu": keras.activations.silu,
}


def activation(name):
    """The activation function for a `BertConfig.hidden_act` name."""
    if name not in ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; known: {sorted(ACTIVATIONS)}.")
    return ACTIVATIONS[name]
