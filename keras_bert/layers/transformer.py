"""The BERT Transformer block: multi-head self-attention and feed-forward, post-LayerNorm.

Dimensions: B batch, S sequence, H hidden, N heads, D head size (H / N), I intermediate.
Sub-layer names follow the original checkpoint (attention/self/query, attention/output/dense,
attention/output/LayerNorm, intermediate/dense, output/dense, output/LayerNorm).
"""

import keras
import tensorflow as tf

from keras_bert.layers import channel_groups, fake_quant, integer, utils
from keras_bert.layers.dropout import ReplicaDropout

try:  # Tells whether the graph being traced will be compiled with XLA (jit_compile=True).
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
except ImportError:  # A TensorFlow without it: take the graph-mode path everywhere.
    GraphOrParentsInXlaContext = None

# Added to attention scores at padded keys. The original uses -10000; exp() of
# it underflows to exactly 0 in float32 and float16 alike.
MASK_VALUE = -10000.0


def attention_bias(input_mask, dtype):
    """Additive attention bias [B, 1, 1, S] from an input mask [B, S] (1 = real token)."""
    if integer.is_integer_friendly():
        return integer.mask_bias(input_mask, MASK_VALUE, dtype)
    # expand_dims, not [:, newaxis, newaxis, :]: TFLite converts that strided slice only for fixed
    # shapes.
    mask = tf.expand_dims(tf.expand_dims(tf.cast(input_mask, dtype), 1), 1)  # (B, 1, 1, S)
    return (1.0 - mask) * tf.cast(MASK_VALUE, dtype)


def _in_xla_context():
    """True while tracing a function that XLA will compile."""
    return GraphOrParentsInXlaContext is not None and GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph()
    )


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
        attention_bias: float tensor [B, 1, 1, S] from `attention_bias()`, or None.
        training: bool.

    Returns:
        float tensor [B, S, H].

    Example:
    >>> block = TransformerBlock(num_attention_heads=2, intermediate_size=32)
    >>> block(tf.zeros([2, 5, 8])).shape
    TensorShape([2, 5, 8])
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
        self._activation = utils.activation(hidden_act)

    def build(self, input_shape):
        hidden = input_shape[-1]
        if hidden % self.num_attention_heads:
            raise ValueError(
                f"Hidden size {hidden} is not divisible by {self.num_attention_heads} heads."
            )
        self.hidden_size = hidden
        self.head_size = hidden // self.num_attention_heads

        def dense(
            units, name
        ):  # Holds kernel and bias only; `_dense` applies them (and the activation).
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

    def _split_heads(self, x, batch, seq):
        x = tf.reshape(x, [batch, seq, self.num_attention_heads, self.head_size])  # (B, S, N, D)
        return tf.transpose(x, [0, 2, 1, 3])  # (B, N, S, D)

    @staticmethod
    def _dense(layer, x, batch, seq, activation=None):
        """`layer`'s kernel, bias and `activation` on 2-D tokens [B*S, in] -> [B*S, out].

        The same math as calling the Dense sub-layer, arranged for the CPU: in graph
        mode MatMul + BiasAdd (+ GELU) on a 2-D tensor, which TensorFlow's oneDNN
        rewrite fuses into one kernel (12% faster encoder under mixed_bfloat16); under
        XLA the bias and activation go on a 3-D view, because XLA:CPU compiles a bias
        add right after a 2-D dot into a slower fused kernel (25% slower GELU layer).
        """
        y = tf.matmul(x, fake_quant.kernel(tf.cast(layer.kernel, x.dtype)))  # (B*S, out)
        bias = tf.cast(layer.bias, x.dtype)
        if not _in_xla_context():
            y = tf.nn.bias_add(y, bias)
            return activation(y) if activation is not None else y
        y = tf.reshape(y, [batch, seq, -1]) + bias  # (B, S, out)
        if activation is not None:
            y = activation(y)
        return tf.reshape(y, [batch * seq, -1])  # (B*S, out)

    def _scores(self, tokens, batch, seq):
        """Scaled query-key scores [B, N, S, S] of tokens [B*S, H], before the mask."""
        q = self._quantized(self._dense(self.query, tokens, batch, seq), "query", batch)
        # Scale the queries rather than the (larger) score matrix.
        q = self._split_heads(q, batch, seq) * integer.constant(
            tf.cast(self.head_size**-0.5, tokens.dtype), tokens
        )  # (B, N, S, D)
        q = self._quantized(q, "query_scaled", batch)
        k = self._quantized(self._dense(self.key, tokens, batch, seq), "key", batch)
        k = self._split_heads(k, batch, seq)  # (B, N, S, D)
        return self._quantized(tf.matmul(q, k, transpose_b=True), "scores", batch)  # (B, N, S, S)

    def _quantized(self, x, site, batch):
        """x fake-quantized at this block's `site` inside `fake_quant.quantization_aware()`."""
        return fake_quant.activation(x, f"{self.path}/{site}", batch)

    def attention_scores(self, x):
        """The block's attention scores on its input x [B, S, H]: q.k / sqrt(D) per head,
        [B, N, S, S], before the padding mask and the softmax (what TinyBERT distills)."""
        batch, seq = tf.shape(x)[0], tf.shape(x)[1]
        return self._scores(tf.reshape(x, [-1, self.hidden_size]), batch, seq)

    def call(self, x, attention_bias=None, training=None):
        groups = channel_groups.active()
        if groups is not None:
            return self._grouped_call(x, attention_bias, groups)
        batch, seq = tf.shape(x)[0], tf.shape(x)[1]
        tokens = tf.reshape(x, [-1, self.hidden_size])  # (B*S, H)
        scores = self._scores(tokens, batch, seq)  # (B, N, S, S)
        v = self._quantized(self._dense(self.value, tokens, batch, seq), "value", batch)
        v = self._split_heads(v, batch, seq)  # (B, N, S, D)
        if attention_bias is not None:
            scores += tf.cast(attention_bias, scores.dtype)
        # Softmax in float32 under mixed precision.
        probs = tf.cast(tf.nn.softmax(tf.cast(scores, "float32"), axis=-1), x.dtype)
        probs = self.attention_dropout(
            fake_quant.fixed(probs, fake_quant.SOFTMAX_RANGE), training=training
        )
        context = self._quantized(tf.matmul(probs, v), "context", batch)  # (B, N, S, D)
        context = tf.reshape(
            tf.transpose(context, [0, 2, 1, 3]), [-1, self.hidden_size]
        )  # (B*S, H)
        attended = self._dense(self.attention_output, context, batch, seq)
        attended = self.hidden_dropout(
            self._quantized(attended, "attention_output", batch), training=training
        )
        tokens = integer.layer_norm(
            self.attention_layer_norm,
            self._quantized(tokens + attended, "attention_residual", batch),
            batch,
        )  # (B*S, H)

        out = self.hidden_dropout(
            self._quantized(
                self._dense(self.output_dense, self._feed_forward(tokens, batch, seq), batch, seq),
                "output_dense",
                batch,
            ),
            training=training,
        )
        out = integer.layer_norm(
            self.output_layer_norm, self._quantized(tokens + out, "output_residual", batch), batch
        )  # (B*S, H)
        return tf.reshape(out, [batch, seq, self.hidden_size])  # (B, S, H)

    def _grouped_call(self, parts, key_mask, groups):
        """`call` (inference) on the residual stream in channel groups (`channel_groups`):
        parts [[B, S, n_g]] -> [[B, S, n_g]]; key_mask: the input mask [B, 1, 1, S] (int32, 1 =
        real token; `BertEncoder` passes it there instead of the additive bias) or None."""
        batch, seq = tf.shape(parts[0])[0], tf.shape(parts[0])[1]
        tokens = [tf.reshape(p, [-1, n]) for p, n in zip(parts, groups.sizes)]  # (B*S, n_g)
        q, k, v = (
            self._split_heads(channel_groups.dense(layer, tokens, groups.groups)[0], batch, seq)
            for layer in (self.query, self.key, self.value)
        )  # (B, N, S, D)
        q = q * tf.cast(self.head_size**-0.5, q.dtype)
        scores = tf.matmul(q, k, transpose_b=True)  # (B, N, S, S)
        if key_mask is not None:
            # A padded key's score is set, not summed with -10000: LiteRT's int8 ADD of the
            # scores and a bias on a grid 137 times coarser gave the top of the scores' grid for
            # -10000 (seen on MiniLM). On that grid the set score is the grid's bottom, where it
            # keeps a little probability: the padded key's value is zeroed too.
            real = tf.not_equal(key_mask, 0)  # (B, 1, 1, S)
            scores = tf.where(real, scores, tf.constant(MASK_VALUE, scores.dtype))
            keep = integer.mask_lookup(key_mask, (0.0, 1.0), v.dtype)  # (B, 1, 1, S)
            v = v * tf.transpose(keep, [0, 1, 3, 2])  # (B, N, S, D) * (B, 1, S, 1)
        context = tf.matmul(tf.nn.softmax(scores, axis=-1), v)  # (B, N, S, D)
        context = tf.reshape(
            tf.transpose(context, [0, 2, 1, 3]), [-1, self.hidden_size]
        )  # (B*S, H)
        attended = channel_groups.dense(self.attention_output, [context], None, groups.groups)
        tokens = channel_groups.layer_norm(
            self.attention_layer_norm, [t + a for t, a in zip(tokens, attended)], groups
        )
        inner = channel_groups.dense(
            self.intermediate, tokens, groups.groups, None, self._activation
        )
        out = channel_groups.dense(self.output_dense, inner, None, groups.groups)
        tokens = channel_groups.layer_norm(
            self.output_layer_norm, [t + o for t, o in zip(tokens, out)], groups
        )
        return [tf.reshape(t, [batch, seq, n]) for t, n in zip(tokens, groups.sizes)]

    def _feed_forward(self, tokens, batch, seq):
        """The activation of the intermediate dense layer [B*S, I] (fake-quantized before and
        after the activation inside `fake_quant.quantization_aware()`)."""
        if not fake_quant.is_active():
            return self._dense(self.intermediate, tokens, batch, seq, self._activation)
        inner = self._quantized(
            self._dense(self.intermediate, tokens, batch, seq), "intermediate", batch
        )
        return self._quantized(self._activation(inner), "activation", batch)

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
