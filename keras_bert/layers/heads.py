"""Pre-training heads: masked LM (tied to the word embeddings) and next sentence.

Dimensions: B batch, S sequence, P masked positions per sequence, H hidden, V vocab.
"""

import keras
from keras import ops

from keras_bert.layers import utils


def gather_positions(sequence, positions):
    """Rows of `sequence` [B, S, H] at `positions` [B, P] -> [B, P, H]."""
    batch, seq, hidden = ops.shape(sequence)[0], ops.shape(sequence)[1], ops.shape(sequence)[2]
    offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * seq, 1)  # (B, 1)
    flat = ops.reshape(sequence, (-1, hidden))  # (B*S, H)
    return ops.take(flat, ops.cast(positions, "int32") + offsets, axis=0)  # (B, P, H)


@keras.saving.register_keras_serializable(package="keras_bert")
class MaskedLMHead(keras.layers.Layer):
    """Dense(H) + activation + LayerNorm, then the transposed word embeddings plus a bias.

    Weight names follow the original `cls/predictions/...` variables. The output
    projection is the embedding layer's own `word_embeddings` matrix, so the two
    stay tied through training and saving.

    Args:
        embeddings: the `BertEmbeddings` layer whose word embeddings are tied.
        hidden_act: str. Transform activation ("gelu" = erf form).
        layer_norm_eps: float.
        initializer_range: float.
        input_size: int or None. Width of `sequence_output` when it differs from the
            embeddings' (ELECTRA's smaller generator on shared embeddings).

    Call arguments:
        sequence_output: float tensor [B, S, H].
        masked_lm_positions: int tensor [B, P] of positions to predict.

    Returns:
        logits [B, P, V], in float32.
    """

    def __init__(
        self,
        embeddings,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        input_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.embeddings = embeddings
        self.input_size = input_size
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.transform = keras.layers.Dense(
            embeddings.hidden_size,
            activation=utils.activation(hidden_act),
            name="transform_dense",
            kernel_initializer=utils.initializer(initializer_range),
            dtype=self.dtype_policy,
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, name="transform_LayerNorm", dtype=self.dtype_policy
        )

    def build(self, input_shape=None):
        hidden = self.embeddings.hidden_size
        self.transform.build((None, None, self.input_size or hidden))
        self.layer_norm.build((None, None, hidden))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.embeddings.vocab_size,), initializer="zeros"
        )
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        x = gather_positions(sequence_output, masked_lm_positions)  # (B, P, H)
        x = self.layer_norm(self.transform(x))  # (B, P, H)
        table = ops.cast(self.embeddings.word_embeddings, x.dtype)  # (V, H)
        logits = ops.einsum("bph,vh->bpv", x, table)  # (B, P, V)
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return tuple(masked_lm_positions_shape) + (self.embeddings.vocab_size,)

    def get_config(self):
        # `embeddings` is a shared layer: the owning model passes it again on load.
        config = super().get_config()
        config.update(
            hidden_act=self.hidden_act,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
        )
        if self.input_size is not None:
            config["input_size"] = self.input_size
        return config
