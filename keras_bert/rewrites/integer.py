"""Integer-friendly forms of two computations, for full-integer TFLite exports.

TFLite's integer quantizer has no integer kernel for two ops that the float graph uses:
`NEG` (Keras' LayerNorm computes `x * inv + (beta - mean * inv)`) and `CAST` int32 -> float
(the attention bias from the input mask). `IntegerEncoder`, the export-time copy of the encoder
(`keras_bert.rewrites.encoder`), traces `(x - mean) * inv + beta` (`layer_norm`) and the bias as a
lookup of `[MASK_VALUE, 0]` by the mask (`attention_bias`): the same values (equal up to float32
rounding, about 1e-7), written with ops that quantize (SUB, GATHER). With `activations="int16"`
(TFLite's 16x8 mode) it also looks up every constant factor at run time (`constant`) and squares
LayerNorm's centered values by MUL (no int16 SQUARED_DIFFERENCE). The float model and its exports
are untouched.

>>> copy = rewrite.substitute_encoder(model, IntegerEncoder, activations="int8")  # doctest: +SKIP
"""

import keras
import tensorflow as tf

from keras_bert.layers.transformer import MASK_VALUE
from keras_bert.rewrites import encoder as rewrite

ACTIVATION_TYPES = ("int8", "int16")


@keras.saving.register_keras_serializable(package="keras_bert")
class IntegerEncoder(rewrite.EncoderRewrite):
    """The encoder's forward pass with LayerNorm, the attention bias and (int16) constant factors
    in their integer-friendly forms.

    Args:
        encoder: the `BertEncoder` whose weights it uses.
        activations: "int8" or "int16" (TFLite's 16x8 mode).
    """

    def __init__(self, encoder, activations="int8", **kwargs):
        if activations not in ACTIVATION_TYPES:
            raise ValueError(f"activations must be one of {ACTIVATION_TYPES}, got {activations!r}.")
        super().__init__(encoder, **kwargs)
        self.activations = activations

    def layer_norm(self, layer, x):
        """`(x - mean) * rsqrt(variance + epsilon) * gamma + beta` over the last axis (no NEG)."""
        return layer_norm(layer, x, self.activations)

    def attention_bias(self, input_mask, dtype):
        return mask_bias(input_mask, MASK_VALUE, dtype)

    def constant(self, value, like):
        return constant(value, like) if self.activations == "int16" else value


def constant(value, like):
    """`value` (a constant factor of `like`) looked up at run time (GATHER of a one-row table at a
    row index computed from `like`'s shape, always 0).

    TFLite's quantizer (TensorFlow 2.20) gives a constant operand of MUL int8 in its 16x8 mode
    while the other operand is int16, and then rejects the MUL ("binary op operands have same
    element type"); a looked-up table is an activation: int16, like the other operand."""
    value = tf.convert_to_tensor(value, like.dtype)
    zero = tf.minimum(tf.shape(like)[:1], 0)  # [0], not a constant: the converter folds those.
    return tf.gather(value[None], zero)  # [1, *value.shape]: broadcasts as value does


def layer_norm(layer, x, activations="int8"):
    """`layer(x)` (a LayerNormalization over the last axis) as
    `(x - mean) * rsqrt(variance + epsilon) * gamma + beta`; for int16 activations the constants
    looked up (`constant`) and the centered values squared by MUL."""
    if activations == "int16":  # TFLite has no int16 SQUARED_DIFFERENCE.
        gamma, beta = (constant(tf.cast(w, x.dtype), x) for w in (layer.gamma, layer.beta))
        centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
        variance = tf.reduce_mean(centered * centered, axis=-1, keepdims=True)
        return centered * (tf.math.rsqrt(variance + layer.epsilon) * gamma) + beta
    gamma, beta = (tf.cast(w, x.dtype) for w in (layer.gamma, layer.beta))
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
