"""BERT input embeddings: word + token type + learned position, LayerNorm, dropout.

Dimensions: B batch, S sequence, H hidden, V vocab, T token types, P max positions.
"""

import keras
from keras import ops

from keras_bert import backend
from keras_bert.layers import utils
from keras_bert.layers.dropout import ReplicaDropout


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEmbeddings(keras.layers.Layer):
    """Sum of word, segment and position embeddings, then LayerNorm and dropout.

    Any sequence length up to `max_position_embeddings` works without rebuilding.
    Ids outside `[0, vocab_size)` or `[0, type_vocab_size)` and sequences longer than
    `max_position_embeddings` raise an error naming the problem (`InvalidArgumentError` on
    TensorFlow, `ValueError` on JAX and PyTorch; `keras_bert.backend.checked`). Inside XLA, which
    cannot raise, the checks are skipped.

    Args:
        vocab_size: int. Number of word ids V.
        hidden_size: int. Embedding width H.
        max_position_embeddings: int. Longest sequence P.
        type_vocab_size: int. Number of segment ids T.
        dropout: float. Dropout rate after LayerNorm.
        layer_norm_eps: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call arguments:
        input_word_ids: int tensor [B, S].
        input_type_ids: int tensor [B, S].
        input_position_ids: optional int tensor [B, S], each token's position (packed rows
            restart at 0 for each instance); None gives 0, 1, ..., S - 1 in every row.
        training: bool.

    Returns:
        float tensor [B, S, H].

    Example:
    >>> layer = BertEmbeddings(100, 16, 32, 2)
    >>> tuple(layer(ops.zeros([2, 5], "int32"), ops.zeros([2, 5], "int32")).shape)
    (2, 5, 16)
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings,
        type_vocab_size,
        dropout=0.1,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        # The tables stay in their own dtype (as Keras' Embedding): rows are cast after the
        # lookup, not the whole [V, H] table on every call under mixed precision.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="LayerNorm"
        )
        self.dropout_layer = ReplicaDropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        init = utils.initializer(self.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.hidden_size), initializer=init
        )
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings",
            shape=(self.type_vocab_size, self.hidden_size),
            initializer=init,
        )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=init,
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, input_position_ids=None, training=None):
        seq_length = ops.shape(input_word_ids)[1]
        input_word_ids = backend.ids_checked(
            input_word_ids, self.vocab_size, "input_word_ids", "vocab_size"
        )
        input_type_ids = backend.ids_checked(
            input_type_ids, self.type_vocab_size, "input_type_ids", "type_vocab_size"
        )
        seq_length = backend.checked(
            seq_length,
            seq_length <= self.max_position_embeddings,
            f"Sequence length exceeds max_position_embeddings ({self.max_position_embeddings}).",
        )
        dtype = self.compute_dtype
        words = ops.cast(backend.gather_rows(self.word_embeddings, input_word_ids), dtype)
        types = ops.cast(backend.gather_rows(self.token_type_embeddings, input_type_ids), dtype)
        if input_position_ids is None:
            positions = ops.expand_dims(self.position_embeddings[:seq_length], 0)  # (1, S, H)
        else:
            input_position_ids = backend.ids_checked(
                input_position_ids,
                self.max_position_embeddings,
                "input_position_ids",
                "max_position_embeddings",
            )
            positions = backend.gather_rows(self.position_embeddings, input_position_ids)
        x = self.layer_norm(words + types + ops.cast(positions, dtype))  # (B, S, H)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(
        self, input_word_ids_shape, input_type_ids_shape=None, input_position_ids_shape=None
    ):
        return tuple(input_word_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            dropout=self.dropout,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
        )
        return config
