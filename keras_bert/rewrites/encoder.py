"""Export- and training-time copies of a model whose encoder computes its forward pass in a
rewritten form, sharing the trained weights (the core `BertEncoder` carries no such modes).

`EncoderRewrite` substitutes a `keras_bert.BertEncoder` in a copy of a task model
(`substitute_encoder`, through `keras.models.clone_model`: every other layer of the copy is the
original layer, so the head's weights are shared too). It computes what the encoder computes, in
TensorFlow ops, with a step for each place a deployment rewrite changes:

- `layer_norm`, `attention_bias`, `constant`: the integer-friendly forms of integer TFLite
  (`keras_bert.rewrites.integer.IntegerEncoder` overrides them);
- a fake-quantization site after each tensor that integer TFLite computes in int8, active only
  inside `keras_bert.rewrites.fake_quant.quantization_aware()` (quantization-aware fine-tuning);
- `call` as a whole: the residual stream in channel groups
  (`keras_bert.rewrites.channel_groups.GroupedEncoder`).

Each Transformer block runs the core block's own forward pass (`TransformerBlock.call`) in a copy,
`BlockRewrite`, whose dense layers, LayerNorms, activation and attention are the rewrite's steps.
Outside those scopes and overrides it gives the encoder's outputs (up to float32 rounding).

Dimensions: B batch, S sequence, H hidden, N heads, D head size, I intermediate.

>>> copy = substitute_encoder(task_model, EncoderRewrite)   # doctest: +SKIP
>>> copy(inputs)["logits"]                                  # doctest: +SKIP
"""

import contextlib
import contextvars
from typing import Any

import keras
import tensorflow as tf

from keras_bert.layers.transformer import TransformerBlock
from keras_bert.layers.transformer import attention_bias as float_attention_bias
from keras_bert.models.encoder import BertEncoder
from keras_bert.rewrites import fake_quant

# The block's dense sub-layers; each one's output is the fake-quantization site of its name.
DENSE_LAYERS = ("query", "key", "value", "attention_output", "intermediate", "output_dense")
# The block's LayerNorms -> the site of their input (the residual sum).
LAYER_NORMS = {
    "attention_layer_norm": "attention_residual",
    "output_layer_norm": "output_residual",
}
# The number of examples B of the `EncoderRewrite` call in progress: a site's tensor holds their
# rows ([B, ...] or [B*S, ...]).
_EXAMPLES: contextvars.ContextVar[Any] = contextvars.ContextVar("keras_bert_rewrite_examples")


@contextlib.contextmanager
def _examples(batch):
    token = _EXAMPLES.set(batch)
    try:
        yield
    finally:
        _EXAMPLES.reset(token)


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
        self.blocks = [BlockRewrite(block, self) for block in encoder.transformer_layers]
        self.built = True

    # === Rewritable steps ===

    def layer_norm(self, layer, x):
        """`layer` (a LayerNormalization) on x [..., H]; inside `quantization_aware()` its
        integer form with each op's output fake-quantized."""
        if fake_quant.is_active():
            return fake_quant.layer_norm(layer, x, _EXAMPLES.get())
        return layer(x)

    def attention_bias(self, input_mask, dtype):
        """The additive attention bias [B, 1, 1, S] of the input mask [B, S]."""
        return float_attention_bias(input_mask, dtype)

    def constant(self, value, like):
        """`value`, a constant factor of `like`."""
        return value

    def quantized(self, x, layer, site):
        """x, fake-quantized at `layer`'s `site` inside `quantization_aware()`."""
        return fake_quant.activation(x, f"{layer.path}/{site}", _EXAMPLES.get())

    @staticmethod
    def dense(layer, x):
        """`layer`'s kernel (fake-quantized per channel inside `quantization_aware()`) and bias
        on tokens [B*S, in] -> [B*S, out]: MatMul and BiasAdd."""
        y = tf.matmul(x, fake_quant.kernel(tf.cast(layer.kernel, x.dtype)))  # (B*S, out)
        return tf.nn.bias_add(y, tf.cast(layer.bias, x.dtype))

    # === The forward pass ===

    def call(self, inputs, training=None, mask=None):
        encoder = self.encoder
        with _examples(tf.shape(inputs["input_word_ids"])[0]):
            x = self.embed(inputs["input_word_ids"], inputs["input_type_ids"], training)
            bias = self.attention_bias(inputs["input_mask"], x.dtype)  # (B, 1, 1, S)
            layer_outputs = []
            for block in self.blocks:
                x = block.call(x, bias, training=training)  # (B, S, H)
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
            x = self.quantized(words + types, layer, "words_types")
            x = self.quantized(x + positions[tf.newaxis], layer, "sum")
        else:
            x = words + types + positions[tf.newaxis]
        x = self.layer_norm(layer.layer_norm, x)
        return layer.dropout_layer(x, training=training)

    def compute_output_spec(self, inputs, training=None, mask=None):
        return self.encoder.compute_output_spec(inputs)


class BlockRewrite(TransformerBlock):
    """A copy of a `TransformerBlock` inside an `EncoderRewrite` call: the core block's forward
    pass (`TransformerBlock.call`) with the rewrite's steps as its sub-layers, sharing the block's
    weights and dropout layers.

    Each dense layer is `EncoderRewrite.dense`, each LayerNorm `EncoderRewrite.layer_norm`; the
    outputs of the dense layers and of the activation, and the residual sums, are fake-quantization
    sites (`EncoderRewrite.quantized`); `self_attention` is the core's in TensorFlow ops with a
    site at each int8 tensor and the queries' scale an `EncoderRewrite.constant`.

    Args:
        block: the built `TransformerBlock`.
        rewrite: the `EncoderRewrite` whose steps it takes.
    """

    def __init__(self, block, rewrite):
        super().__init__(**block.get_config())
        self.hidden_size, self.head_size = block.hidden_size, block.head_size
        self.attention_dropout = block.attention_dropout
        self.hidden_dropout = block.hidden_dropout
        # Functions of the block's layers (Keras tracks no function: the weights stay the block's).
        self.site = lambda x, site: rewrite.quantized(x, block, site)
        self.constant = rewrite.constant
        for name in DENSE_LAYERS:
            setattr(self, name, self._dense(rewrite, getattr(block, name), name))
        for name, site in LAYER_NORMS.items():
            setattr(self, name, self._layer_norm(rewrite, getattr(block, name), site))
        self.activation = lambda x: self.site(block.activation(x), "activation")
        self.built = True

    def _dense(self, rewrite, layer, site):
        return lambda x: self.site(rewrite.dense(layer, x), site)

    def _layer_norm(self, rewrite, layer, site):
        return lambda x: rewrite.layer_norm(layer, self.site(x, site))

    def self_attention(self, tokens, batch, seq, attention_bias=None, training=None):
        q = self.split_heads(self.query(tokens), batch, seq)  # (B, N, S, D)
        # Scale the queries rather than the (larger) score matrix.
        q = q * self.constant(tf.cast(self.head_size**-0.5, tokens.dtype), tokens)
        q = self.site(q, "query_scaled")
        k = self.split_heads(self.key(tokens), batch, seq)  # (B, N, S, D)
        scores = self.site(tf.matmul(q, k, transpose_b=True), "scores")  # (B, N, S, S)
        v = self.split_heads(self.value(tokens), batch, seq)  # (B, N, S, D)
        if attention_bias is not None:
            scores += tf.cast(attention_bias, scores.dtype)
        probs = tf.cast(tf.nn.softmax(tf.cast(scores, "float32"), axis=-1), tokens.dtype)
        probs = self.attention_dropout(
            fake_quant.fixed(probs, fake_quant.SOFTMAX_RANGE), training=training
        )
        return self.merge_heads(self.site(tf.matmul(probs, v), "context"))  # (B*S, H)
