"""The BERT Transformer block: multi-head self-attention and feed-forward, post-LayerNorm.

Dimensions: B batch, S sequence, H hidden, N heads, D head size (H / N), I intermediate.
Sub-layer names follow the original checkpoint (attention/self/query, attention/output/dense,
attention/output/LayerNorm, intermediate/dense, output/dense, output/LayerNorm).

Written in `keras.ops`: the same block runs on TensorFlow, JAX and PyTorch. Every dense layer
is called through `__call__`, so Keras' own `quantize` (int8, int4, float8), LoRA and dtype
policies apply to it. The dense layers work on the tokens as rows [B*S, H]: one 2-D matrix
multiply each, which TensorFlow's CPU kernels fuse with the bias and activation, and which
TFLite converts to FULLY_CONNECTED.

The forward pass (`call`) is composed of the block's sub-layers, its feed-forward `activation`
and its `self_attention` step, all public: a copy of the block that substitutes some of them
(sharing the weights) runs this same forward pass.
"""

import keras
from keras import ops

from keras_bert.layers import utils
from keras_bert.layers.dropout import ReplicaDropout

# Added to attention scores at padded keys. The original uses -10000; exp() of
# it underflows to exactly 0 in float32 and float16 alike.
MASK_VALUE = -10000.0


def attention_bias(input_mask, dtype):
    """Additive attention bias [B, 1, 1, S] from an input mask [B, S] (1 = real token)."""
    # expand_dims, not [:, newaxis, newaxis, :]: TFLite converts that strided slice only for fixed
    # shapes.
    mask = ops.expand_dims(ops.expand_dims(ops.cast(input_mask, dtype), 1), 1)  # (B, 1, 1, S)
    return (1.0 - mask) * ops.cast(MASK_VALUE, dtype)


def packed_attention_bias(instance_ids, dtype):
    """Block-diagonal additive attention bias [B, 1, S, S] of packed rows.

    `instance_ids` [B, S] numbers the instances of each row 1, 2, ... (0 = padding): a token
    attends only to the real tokens of its own instance. (Padding queries see every key masked
    alike; their outputs are unused.)
    """
    ids = ops.cast(instance_ids, "int32")
    same = ops.logical_and(
        ops.equal(ops.expand_dims(ids, 2), ops.expand_dims(ids, 1)),  # (B, S, S)
        ops.expand_dims(ids > 0, 1),  # (B, 1, S): real keys
    )
    mask = ops.expand_dims(ops.cast(same, dtype), 1)  # (B, 1, S, S)
    return (1.0 - mask) * ops.cast(MASK_VALUE, dtype)


@keras.saving.register_keras_serializable(package="keras_bert")
class TransformerBlock(keras.layers.Layer):
    """One BERT encoder layer.

    Args:
        num_attention_heads: int. Heads N.
        intermediate_size: int. Feed-forward inner width I.
        hidden_act: str. Feed-forward activation name ("gelu" = erf form).
        hidden_dropout_prob: float. Dropout after the attention and feed-forward outputs.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        layer_norm_eps: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call arguments:
        x: float tensor [B, S, H].
        attention_bias: float tensor [B, 1, 1, S] from `attention_bias()`, [B, 1, S, S] from
            `packed_attention_bias()`, or None.
        training: bool.

    Returns:
        float tensor [B, S, H].

    Attributes (besides the arguments): `activation`, the feed-forward's activation function (of
    `hidden_act`); after `build`, `hidden_size` H, `head_size` D and the sub-layers `query`, `key`,
    `value`, `attention_output`, `attention_layer_norm`, `intermediate`, `output_dense`,
    `output_layer_norm`, `attention_dropout` and `hidden_dropout`.

    Example:
    >>> block = TransformerBlock(num_attention_heads=2, intermediate_size=32)
    >>> tuple(block(ops.zeros([2, 5, 8])).shape)
    (2, 5, 8)
    """

    def __init__(
        self,
        num_attention_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.activation = utils.activation(hidden_act)

    def build(self, input_shape):
        hidden = input_shape[-1]
        if hidden % self.num_attention_heads:
            raise ValueError(
                f"Hidden size {hidden} is not divisible by {self.num_attention_heads} heads."
            )
        self.hidden_size = hidden
        self.head_size = hidden // self.num_attention_heads

        def dense(units, name):  # No activation: `call` applies it after the layer.
            return keras.layers.Dense(
                units,
                name=name,
                dtype=self.dtype_policy,
                kernel_initializer=utils.initializer(self.initializer_range),
            )

        def layer_norm(name):
            return keras.layers.LayerNormalization(
                epsilon=self.layer_norm_eps, name=name, dtype=self.dtype_policy
            )

        # === Layers ===
        self.query = dense(hidden, "query")
        self.key = dense(hidden, "key")
        self.value = dense(hidden, "value")
        self.attention_output = dense(hidden, "attention_output_dense")
        self.attention_layer_norm = layer_norm("attention_output_LayerNorm")
        self.intermediate = dense(self.intermediate_size, "intermediate_dense")
        self.output_dense = dense(hidden, "output_dense")
        self.output_layer_norm = layer_norm("output_LayerNorm")
        self.attention_dropout = ReplicaDropout(
            self.attention_probs_dropout_prob, dtype=self.dtype_policy
        )
        self.hidden_dropout = ReplicaDropout(self.hidden_dropout_prob, dtype=self.dtype_policy)
        seq_shape = (None, None, hidden)
        for layer in (self.query, self.key, self.value, self.attention_output, self.intermediate):
            layer.build(seq_shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.attention_layer_norm.build(seq_shape)
        self.output_layer_norm.build(seq_shape)
        self.built = True

    def split_heads(self, x, batch, seq):
        """Tokens [B*S, H] (rows of `batch` sequences of `seq`) -> heads [B, N, S, D]."""
        x = ops.reshape(x, (batch, seq, self.num_attention_heads, self.head_size))  # (B, S, N, D)
        return ops.transpose(x, (0, 2, 1, 3))  # (B, N, S, D)

    def merge_heads(self, x):
        """Heads [B, N, S, D] -> tokens [B*S, H]."""
        return ops.reshape(ops.transpose(x, (0, 2, 1, 3)), (-1, self.hidden_size))  # (B*S, H)

    def _scores(self, tokens, batch, seq):
        """Scaled query-key scores [B, N, S, S] of tokens [B*S, H], before the mask."""
        q = self.split_heads(self.query(tokens), batch, seq)  # (B, N, S, D)
        # Scale the queries rather than the (larger) score matrix.
        q = q * ops.cast(self.head_size**-0.5, q.dtype)
        k = self.split_heads(self.key(tokens), batch, seq)  # (B, N, S, D)
        return ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # (B, N, S, S)

    def attention_scores(self, x):
        """The block's attention scores on its input x [B, S, H]: q.k / sqrt(D) per head,
        [B, N, S, S], before the padding mask and the softmax (what TinyBERT distills)."""
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        return self._scores(ops.reshape(x, (-1, self.hidden_size)), batch, seq)

    def self_attention(self, tokens, batch, seq, attention_bias=None, training=None):
        """Multi-head self-attention of tokens [B*S, H] (rows of `batch` sequences of `seq`):
        the heads' contexts [B*S, H], before the `attention_output` layer."""
        scores = self._scores(tokens, batch, seq)  # (B, N, S, S)
        v = self.split_heads(self.value(tokens), batch, seq)  # (B, N, S, D)
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, scores.dtype)
        # Softmax in float32 under mixed precision.
        probs = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=-1), tokens.dtype)
        probs = self.attention_dropout(probs, training=training)
        return self.merge_heads(ops.matmul(probs, v))  # (B*S, H)

    def call(self, x, attention_bias=None, training=None):
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        tokens = ops.reshape(x, (-1, self.hidden_size))  # (B*S, H)
        context = self.self_attention(tokens, batch, seq, attention_bias, training)  # (B*S, H)
        attended = self.hidden_dropout(self.attention_output(context), training=training)
        tokens = self.attention_layer_norm(tokens + attended)  # (B*S, H)
        inner = self.activation(self.intermediate(tokens))  # (B*S, I)
        out = self.hidden_dropout(self.output_dense(inner), training=training)
        out = self.output_layer_norm(tokens + out)  # (B*S, H)
        return ops.reshape(out, (batch, seq, self.hidden_size))  # (B, S, H)

    def compute_output_shape(self, x_shape, attention_bias_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
        )
        return config
