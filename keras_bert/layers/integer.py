"""Integer-friendly forms of two computations, for full-integer TFLite exports.

TFLite's integer quantizer has no integer kernel for two ops that the float graph uses:
`NEG` (Keras' LayerNorm computes `x * inv + (beta - mean * inv)`) and `CAST` int32 -> float
(the attention bias from the input mask). Inside `integer_friendly()` the layers trace
`(x - mean) * inv + beta` (`layer_norm`) and the bias as a lookup of `[MASK_VALUE, 0]` by the
mask (`attention_bias`): the same values (equal up to float32 rounding, about 1e-7), written
with ops that quantize (SUB, GATHER). `integer_friendly("int16")` (TFLite's 16x8 mode) also
looks up every constant factor at run time (`constant`) and squares LayerNorm's centered values
by MUL (no int16 SQUARED_DIFFERENCE). Outside it, everything is traced as before: float
exports keep their exact graphs.

>>> with integer_friendly():   # doctest: +SKIP
...     concrete = function.get_concrete_function()
"""

import contextlib
import contextvars

import keras
import tensorflow as tf

from keras_bert.layers import channel_groups, fake_quant

# None outside `integer_friendly()`, else its activations type ("int8" or "int16").
_INTEGER_FRIENDLY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "keras_bert_integer_friendly", default=None
)
ACTIVATION_TYPES = ("int8", "int16")


@contextlib.contextmanager
def integer_friendly(activations: str = "int8"):
    """Traces the layers' LayerNorms and attention bias with ops that quantize to integers;
    with `activations="int16"` (TFLite's 16x8 mode) also every multiplication by a constant
    as one by a looked-up tensor (`constant`)."""
    if activations not in ACTIVATION_TYPES:
        raise ValueError(f"activations must be one of {ACTIVATION_TYPES}, got {activations!r}.")
    token = _INTEGER_FRIENDLY.set(activations)
    try:
        yield
    finally:
        _INTEGER_FRIENDLY.reset(token)


def is_integer_friendly() -> bool:
    """Whether `integer_friendly()` is active."""
    return _INTEGER_FRIENDLY.get() is not None


def constant(value: tf.Tensor | float, like: tf.Tensor) -> tf.Tensor:
    """`value` (a constant factor of `like`), or inside `integer_friendly("int16")` the same
    values looked up at run time (GATHER of a one-row table at a row index computed from
    `like`'s shape, always 0).

    TFLite's quantizer (TensorFlow 2.20) gives a constant operand of MUL int8 in its 16x8 mode
    while the other operand is int16, and then rejects the MUL ("binary op operands have same
    element type"); a looked-up table is an activation: int16, like the other operand."""
    if _INTEGER_FRIENDLY.get() != "int16":
        return value
    value = tf.convert_to_tensor(value, like.dtype)
    zero = tf.minimum(tf.shape(like)[:1], 0)  # [0], not a constant: the converter folds those.
    return tf.gather(value[None], zero)  # [1, *value.shape]: broadcasts as value does


def layer_norm(layer: keras.layers.LayerNormalization, x, batch=None):
    """`layer(x)`, or inside `integer_friendly()` the same normalization over the last axis as
    `(x - mean) * rsqrt(variance + epsilon) * gamma + beta` (no NEG); inside
    `fake_quant.quantization_aware()` that form with each op's output fake-quantized (x holds
    the rows of `batch` examples; default its first axis)."""
    if fake_quant.is_active():
        return _quantized_layer_norm(layer, x, tf.shape(x)[0] if batch is None else batch)
    channel_groups.record_channels(layer.path, x)
    if not is_integer_friendly():
        return layer(x)
    gamma, beta = (constant(tf.cast(w, x.dtype), x) for w in (layer.gamma, layer.beta))
    if _INTEGER_FRIENDLY.get() == "int16":  # TFLite has no int16 SQUARED_DIFFERENCE.
        centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
        variance = tf.reduce_mean(centered * centered, axis=-1, keepdims=True)
        return centered * (tf.math.rsqrt(variance + layer.epsilon) * gamma) + beta
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    inv = tf.math.rsqrt(variance + layer.epsilon) * gamma
    return (x - mean) * inv + beta


def mask_bias(input_mask, mask_value, dtype):
    """The additive attention bias [B, 1, 1, S] of an input mask [B, S] (1 = real token) as a
    lookup of [mask_value, 0] by the mask (no CAST from integers to float)."""
    bias = mask_lookup(input_mask, (mask_value, 0.0), dtype)  # (B, S)
    return tf.expand_dims(tf.expand_dims(bias, 1), 1)  # (B, 1, 1, S)


def mask_lookup(input_mask, values, dtype):
    """values[0] where the input mask (any shape) is 0, values[1] where it is 1, as a GATHER from
    the two-row table `values` (no CAST from integers to float)."""
    table = tf.constant(values, dtype)
    return tf.gather(table, tf.clip_by_value(tf.cast(input_mask, tf.int32), 0, 1))


def _quantized_layer_norm(layer, x, batch):
    """The integer-friendly LayerNorm as int8_integer_only TFLite computes it: every op's output
    on its own int8 grid (MEAN, SQUARED_DIFFERENCE, MEAN, RSQRT, MUL, SUB, MUL, ADD)."""
    name = layer.gamma.path.rsplit("/", 1)[0]

    def quantized(value, site):
        return fake_quant.activation(value, f"{name}/{site}", batch)

    mean = quantized(tf.reduce_mean(x, -1, keepdims=True), "mean")
    squares = quantized(tf.math.squared_difference(x, tf.stop_gradient(mean)), "squares")
    variance = quantized(tf.reduce_mean(squares, -1, keepdims=True), "variance")
    inv = quantized(tf.math.rsqrt(variance + layer.epsilon), "rsqrt")
    inv = quantized(inv * fake_quant.constant(tf.cast(layer.gamma, x.dtype)), "inv")
    y = quantized(quantized(x - mean, "centered") * inv, "scaled")
    return quantized(y + fake_quant.constant(tf.cast(layer.beta, x.dtype)), "output")
