"""Pooling a sequence of token vectors into one vector per sequence.

Dimensions: B batch, S sequence, H hidden.
"""

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert")
class MaskedMeanPooling(keras.layers.Layer):
    """The mean of each sequence's token vectors over its non-padding tokens (`input_mask` 1),
    [CLS] and [SEP] included: how sentence-transformers checkpoints such as all-MiniLM-L6-v2 were
    trained to embed a text. Computed in float32 (also under mixed precision).

    Call arguments:
        sequence_output: float [B, S, H].
        input_mask: int or bool [B, S], 1 for tokens, 0 for padding.

    Returns:
        float32 [B, H]; zeros for a row without tokens.

    Example:
    >>> pooled = MaskedMeanPooling()(keras.ops.ones([2, 3, 4]), [[1, 1, 0], [1, 0, 0]])
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, sequence_output, input_mask):
        mask = ops.expand_dims(ops.cast(input_mask, "float32"), -1)  # (B, S, 1)
        total = ops.sum(ops.cast(sequence_output, "float32") * mask, axis=1)  # (B, H)
        return total / ops.maximum(ops.sum(mask, axis=1), 1.0)  # (B, H)

    def compute_output_shape(self, sequence_output_shape, input_mask_shape):
        return (sequence_output_shape[0], sequence_output_shape[-1])
