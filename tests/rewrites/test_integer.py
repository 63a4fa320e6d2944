"""The integer-friendly forms of integer TFLite (`keras_bert.rewrites.integer`): the same values
as the float layers they replace."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from finetune_cases import TINY

import keras_bert
from keras_bert.layers.transformer import attention_bias
from keras_bert.rewrites import integer


def test_integer_friendly_forms_equal_the_float_layers():
    keras.utils.set_random_seed(3)
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    inputs = {
        "input_word_ids": tf.constant(np.random.default_rng(0).integers(0, 30, (3, 12)), tf.int32),
        "input_mask": tf.constant([[1] * 12, [1] * 7 + [0] * 5, [1] * 3 + [0] * 9], tf.int32),
        "input_type_ids": tf.zeros((3, 12), tf.int32),
    }
    for layer in encoder.layers:  # Non-trivial LayerNorm parameters.
        for weight in layer.weights:
            if "LayerNorm" in weight.path:
                weight.assign(np.random.default_rng(1).normal(1.0, 0.5, weight.shape))
    want = encoder(inputs)
    for activations in integer.ACTIVATION_TYPES:
        got = integer.IntegerEncoder(encoder, activations)(inputs)
        for name in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=activations)
    # The copy left the float encoder as it was.
    np.testing.assert_array_equal(encoder(inputs)["sequence_output"], want["sequence_output"])
    with pytest.raises(ValueError, match="activations must be one of"):
        integer.IntegerEncoder(encoder, "int4")
    bias = integer.mask_bias(inputs["input_mask"], -10000.0, tf.float32)
    np.testing.assert_array_equal(bias, attention_bias(inputs["input_mask"], tf.float32))
