"""BERT input embeddings: word + token type + learned position, LayerNorm, dropout.

Dimensions: B batch, S sequence, H hidden, V vocab, T token types, P max positions.
"""

import keras
import tensorflow as tf

from keras_bert.layers import channel_groups, fake_quant, integer, utils
from keras_bert.layers.dropout import ReplicaDropout


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEmbeddings(keras.layers.Layer):
    """Sum of word, segment and position embeddings, then LayerNorm and dropout.

    Any sequence length up to `max_position_embeddings` works without rebuilding.
    Ids outside `[0, vocab_size)` or `[0, type_vocab_size)` and sequences longer than
    `max_position_embeddings` raise `InvalidArgumentError` naming the problem (the
    checks are skipped inside XLA, which cannot raise).

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
        training: bool.

    Returns:
        float tensor [B, S, H].

    Example:
    >>> layer = BertEmbeddings(100, 16, 32, 2)
    >>> layer(tf.zeros([2, 5], "int32"), tf.zeros([2, 5], "int32")).shape
    TensorShape([2, 5, 16])
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

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = tf.shape(input_word_ids)[1]
        checks = [
            utils.assert_ids_in_range(
                input_word_ids, self.vocab_size, "input_word_ids", "vocab_size"
            ),
            utils.assert_ids_in_range(
                input_type_ids, self.type_vocab_size, "input_type_ids", "type_vocab_size"
            ),
            tf.debugging.assert_less_equal(
                seq_length,
                self.max_position_embeddings,
                message=(
                    "Sequence length exceeds max_position_embeddings "
                    f"({self.max_position_embeddings})."
                ),
            ),
        ]
        groups = channel_groups.active()
        if groups is not None:
            with tf.control_dependencies(checks):
                return self._grouped(input_word_ids, input_type_ids, seq_length, groups)
        with tf.control_dependencies(checks):
            words = tf.gather(self.word_embeddings, input_word_ids)  # (B, S, H)
            types = tf.gather(self.token_type_embeddings, input_type_ids)  # (B, S, H)
            positions = self.position_embeddings[:seq_length]  # (S, H)
        if fake_quant.is_active():  # Each table on its int8 grid, each sum on its own.
            words = fake_quant.constant(self.word_embeddings, words)
            types = fake_quant.constant(self.token_type_embeddings, types)
            positions = fake_quant.constant(self.position_embeddings, positions)
            batch = tf.shape(words)[0]
            x = fake_quant.activation(words + types, f"{self.path}/words_types", batch)
            x = fake_quant.activation(x + positions[tf.newaxis], f"{self.path}/sum", batch)
        else:
            x = words + types + positions[tf.newaxis]
        x = integer.layer_norm(self.layer_norm, x)
        return self.dropout_layer(x, training=training)

    def _grouped(self, input_word_ids, input_type_ids, seq_length, groups):
        """The embeddings (inference) in channel groups (`channel_groups`): [[B, S, n_g]], each
        group looked up in its own columns of the tables (each its own constant, so each its own
        int8 grid: a slice or gather of one table keeps that table's grid)."""
        batch = tf.shape(input_word_ids)[0]
        tables = zip(
            *(
                channel_groups.split(table, groups)
                for table in (self.word_embeddings, self.token_type_embeddings)
            ),
            (p[:seq_length] for p in channel_groups.split(self.position_embeddings, groups)),
        )
        parts = [
            tf.reshape(
                tf.gather(words, input_word_ids) + tf.gather(types, input_type_ids) + positions,
                [-1, n],
            )  # (B*S, n_g)
            for (words, types, positions), n in zip(tables, groups.sizes)
        ]
        parts = channel_groups.layer_norm(self.layer_norm, parts, groups)
        return [tf.reshape(p, [batch, seq_length, n]) for p, n in zip(parts, groups.sizes)]

    def compute_output_shape(self, input_word_ids_shape, input_type_ids_shape=None):
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
