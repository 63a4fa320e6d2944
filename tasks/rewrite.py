"""Export- and training-time copies of a model whose encoder computes its forward pass in a
rewritten form, sharing the trained weights (the core `BertEncoder` carries no such modes).

`EncoderRewrite` substitutes a `keras_bert.BertEncoder` in a copy of a task model
(`substitute_encoder`, through `keras.models.clone_model`: every other layer of the copy is the
original layer, so the head's weights are shared too). It computes what the encoder computes, op
by op in TensorFlow, with a step for each place a deployment rewrite changes:

- `layer_norm`, `attention_bias`, `constant`: the integer-friendly forms of integer TFLite
  (`keras_bert.export.integer.IntegerEncoder` overrides them);
- a fake-quantization site after each tensor that integer TFLite computes in int8, active only
  inside `keras_bert.tasks.fake_quant.quantization_aware()` (quantization-aware fine-tuning);
- `call` as a whole: the residual stream in channel groups
  (`keras_bert.export.channel_groups.GroupedEncoder`).

Outside those scopes and overrides it gives the encoder's outputs (up to float32 rounding).

Dimensions: B batch, S sequence, H hidden, N heads, D head size, I intermediate.

>>> copy = substitute_encoder(task_model, EncoderRewrite)   # doctest: +SKIP
>>> copy(inputs)["logits"]                                  # doctest: +SKIP
"""

import keras
import tensorflow as tf

from keras_bert.layers.transformer import attention_bias as float_attention_bias
from keras_bert.models.encoder import BertEncoder
from keras_bert.tasks import fake_quant


def substitute_encoder(model, rewrite, **kwargs):
    """A copy of `model` whose `BertEncoder` is `rewrite(encoder, **kwargs)`.

    Args:
        model: a task model (a functional model holding one `BertEncoder`), or a `BertEncoder`.
        rewrite: an `EncoderRewrite` class (or a callable encoder -> layer).
        **kwargs: passed to `rewrite`.

    Returns:
        for a task model, a functional model sharing every layer but the encoder with `model`;
        for an encoder, the rewrite layer itself (called on the encoder's input dict).
    """
    if isinstance(model, BertEncoder):
        return rewrite(model, **kwargs)
    found = [layer for layer in model.layers if isinstance(layer, BertEncoder)]
    if len(found) != 1:
        raise ValueError(
            f"{type(model).__name__} holds {len(found)} BertEncoders; a rewrite needs exactly one."
        )

    def clone(layer):
        return rewrite(layer, **kwargs) if layer is found[0] else layer

    return keras.models.clone_model(model, clone_function=clone)


@keras.saving.register_keras_serializable(package="keras_bert")
class EncoderRewrite(keras.layers.Layer):
    """A `BertEncoder`'s forward pass in TensorFlow ops, each rewritable step a method.

    Args:
        encoder: the `BertEncoder` whose layers (and so weights) it uses.

    Call arguments:
        inputs: dict of the encoder's int32 [B, S] inputs.
        training: bool (dropout, as the encoder's own layers apply it).

    Returns:
        the encoder's output dict (`sequence_output`, `pooled_output`, `encoder_outputs`).
    """

    def __init__(self, encoder, **kwargs):
        kwargs.setdefault("name", encoder.name)
        super().__init__(dtype=encoder.dtype_policy, **kwargs)
        self.encoder = encoder
        self.built = True

    # === Rewritable steps ===

    def layer_norm(self, layer, x, batch=None):
        """`layer` (a LayerNormalization) on x [..., H]; inside `quantization_aware()` its
        integer form with each op's output fake-quantized (x holds the rows of `batch` examples;
        default its first axis)."""
        if fake_quant.is_active():
            return fake_quant.layer_norm(layer, x, tf.shape(x)[0] if batch is None else batch)
        return layer(x)

    def attention_bias(self, input_mask, dtype):
        """The additive attention bias [B, 1, 1, S] of the input mask [B, S]."""
        return float_attention_bias(input_mask, dtype)

    def constant(self, value, like):
        """`value`, a constant factor of `like`."""
        return value

    def quantized(self, x, layer, site, batch):
        """x, fake-quantized at `layer`'s `site` inside `quantization_aware()`."""
        return fake_quant.activation(x, f"{layer.path}/{site}", batch)

    # === The forward pass ===

    def call(self, inputs, training=None, mask=None):
        encoder = self.encoder
        x = self.embed(inputs["input_word_ids"], inputs["input_type_ids"], training)  # (B, S, H)
        bias = self.attention_bias(inputs["input_mask"], x.dtype)  # (B, 1, 1, S)
        layer_outputs = []
        for block in encoder.transformer_layers:
            x = self.block(block, x, bias, training)
            layer_outputs.append(x)
        return {
            "sequence_output": x,
            "pooled_output": encoder.pooler(x[:, 0, :]),
            "encoder_outputs": layer_outputs,
        }

    def embed(self, input_word_ids, input_type_ids, training=None):
        """The embeddings [B, S, H] (`BertEmbeddings`), each table and sum fake-quantized inside
        `quantization_aware()`."""
        layer = self.encoder.embeddings
        seq_length = tf.shape(input_word_ids)[1]
        words = tf.gather(layer.word_embeddings, input_word_ids)  # (B, S, H)
        types = tf.gather(layer.token_type_embeddings, input_type_ids)  # (B, S, H)
        positions = layer.position_embeddings[:seq_length]  # (S, H)
        if fake_quant.is_active():  # Each table on its int8 grid, each sum on its own.
            words = fake_quant.constant(layer.word_embeddings, words)
            types = fake_quant.constant(layer.token_type_embeddings, types)
            positions = fake_quant.constant(layer.position_embeddings, positions)
            batch = tf.shape(words)[0]
            x = fake_quant.activation(words + types, f"{layer.path}/words_types", batch)
            x = fake_quant.activation(x + positions[tf.newaxis], f"{layer.path}/sum", batch)
        else:
            x = words + types + positions[tf.newaxis]
        x = self.layer_norm(layer.layer_norm, x)
        return layer.dropout_layer(x, training=training)

    @staticmethod
    def dense(layer, x, activation=None):
        """`layer`'s kernel (fake-quantized per channel inside `quantization_aware()`), bias
        and `activation` on tokens [B*S, in] -> [B*S, out]: MatMul and BiasAdd."""
        y = tf.matmul(x, fake_quant.kernel(tf.cast(layer.kernel, x.dtype)))  # (B*S, out)
        y = tf.nn.bias_add(y, tf.cast(layer.bias, x.dtype))
        return activation(y) if activation is not None else y

    @staticmethod
    def split_heads(block, t, batch, seq):
        """Tokens [B*S, H] -> heads [B, N, S, D] of `block` (a `TransformerBlock`)."""
        t = tf.reshape(t, [batch, seq, block.num_attention_heads, block.head_size])  # (B, S, N, D)
        return tf.transpose(t, [0, 2, 1, 3])  # (B, N, S, D)

    def block(self, block, x, attention_bias, training=None):
        """A `TransformerBlock` on x [B, S, H] -> [B, S, H]."""
        batch, seq = tf.shape(x)[0], tf.shape(x)[1]
        hidden = block.hidden_size

        def split_heads(t):
            return self.split_heads(block, t, batch, seq)

        def site(t, name):
            return self.quantized(t, block, name, batch)

        tokens = tf.reshape(x, [-1, hidden])  # (B*S, H)
        q = site(self.dense(block.query, tokens), "query")
        # Scale the queries rather than the (larger) score matrix.
        q = split_heads(q) * self.constant(tf.cast(block.head_size**-0.5, tokens.dtype), tokens)
        q = site(q, "query_scaled")  # (B, N, S, D)
        k = split_heads(site(self.dense(block.key, tokens), "key"))  # (B, N, S, D)
        scores = site(tf.matmul(q, k, transpose_b=True), "scores")  # (B, N, S, S)
        v = split_heads(site(self.dense(block.value, tokens), "value"))  # (B, N, S, D)
        if attention_bias is not None:
            scores += tf.cast(attention_bias, scores.dtype)
        probs = tf.cast(tf.nn.softmax(tf.cast(scores, "float32"), axis=-1), x.dtype)
        probs = block.attention_dropout(
            fake_quant.fixed(probs, fake_quant.SOFTMAX_RANGE), training=training
        )
        context = site(tf.matmul(probs, v), "context")  # (B, N, S, D)
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, hidden])  # (B*S, H)
        attended = site(self.dense(block.attention_output, context), "attention_output")
        attended = block.hidden_dropout(attended, training=training)
        tokens = self.layer_norm(
            block.attention_layer_norm, site(tokens + attended, "attention_residual"), batch
        )  # (B*S, H)
        if fake_quant.is_active():
            inner = site(self.dense(block.intermediate, tokens), "intermediate")
            inner = site(block._activation(inner), "activation")
        else:
            inner = self.dense(block.intermediate, tokens, block._activation)  # (B*S, I)
        out = site(self.dense(block.output_dense, inner), "output_dense")
        out = block.hidden_dropout(out, training=training)
        out = self.layer_norm(block.output_layer_norm, site(tokens + out, "output_residual"), batch)
        return tf.reshape(out, [batch, seq, hidden])  # (B, S, H)

    def compute_output_spec(self, inputs, training=None, mask=None):
        return self.encoder.compute_output_spec(inputs)
