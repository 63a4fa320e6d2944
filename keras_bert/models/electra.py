"""ElectraPretrainer: ELECTRA's replaced-token detection (Clark et al., ICLR 2020) on a
`BertEncoder`.

Dimensions: B batch, S sequence, P masked positions per sequence, V vocab, H hidden.

A small generator (Transformer blocks of `generator_size` times the encoder's width, heads and
intermediate size, as many layers) reads the masked input through the discriminator's own
embeddings layer (token, position and type embeddings shared, as in the paper, with a projection
to the generator's width) and predicts the masked tokens with a masked-LM head tied to the
shared word embeddings. Its samples (categorical sampling from its softmax; no gradient flows
through the sampling) replace the masked tokens; the discriminator, the
`BertEncoder` kept after pre-training (`encoder`), predicts for every token whether it was
replaced. Loss: the generator's masked-LM loss + 50 x the discriminator's binary cross-entropy
over the real (non-padding) tokens.

Data: the original pre-training records; `masked_lm_ids` (the original tokens) is an input too,
as the labels of the discriminator come from it (`with_original_ids` maps a dataset's batches).
Packed rows (`packed=True`, several instances per row, `keras_bert.pretraining.packing`): the
generator and the discriminator both read them as `BertEncoder.encode_packed` does (each
instance its own positions, a block-diagonal attention mask), `input_position_ids` and
`input_instance_ids` [B, S] replace `input_mask`, and the discriminator's loss covers every real
token of every instance; there is no sentence head, so `cls_positions` is not an input. Each
instance gets exactly the generator's and the discriminator's logits it gets alone (given the
same samples).
"""

from __future__ import annotations

from typing import Any, ClassVar

import keras
from keras import ops

from keras_bert import backend
from keras_bert.layers import utils
from keras_bert.layers.heads import MaskedLMHead
from keras_bert.models.encoder import (
    PACKED_INPUT_NAMES,
    BertEncoder,
    _AttentionBias,
    _PackedAttentionBias,
    encoder_inputs,
    transformer_blocks,
)
from keras_bert.models.pretrainer import loss_to_minimize, masked_lm_loss_sums

DISCRIMINATOR_WEIGHT = 50.0  # The paper's lambda.


def generator_shape(config: Any, generator_size: float) -> dict[str, int]:
    """The generator's hidden_size, num_attention_heads and intermediate_size: `generator_size`
    times the encoder's (at least one head of at least one unit)."""
    heads = max(1, round(config.num_attention_heads * generator_size))
    hidden = max(heads, round(config.hidden_size * generator_size) // heads * heads)
    return {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "intermediate_size": max(1, round(config.intermediate_size * generator_size)),
    }


def electra_loss(
    labels: dict[str, Any], outputs: dict[str, Any], input_mask: Any
) -> dict[str, Any]:
    """The generator's masked-LM loss + DISCRIMINATOR_WEIGHT x the discriminator's loss.

    Args:
        labels: dict with `masked_lm_ids` and `masked_lm_weights` [B, P].
        outputs: dict with `mlm_logits` [B, P, V] (the generator's), `rtd_logits` [B, S] and
            `rtd_labels` [B, S] (1.0 where the token was replaced by a different one).
        input_mask: [B, S], 1 for real tokens: the tokens the discriminator's loss averages
            (`real_tokens` of the inputs, packed or not).

    Returns:
        dict of scalar float32 `loss`, `mlm_loss`, `rtd_loss` (the mean binary cross-entropy;
        over all replicas under `tf.distribute`, as `pretraining_loss`'s masked-LM mean).
    """
    total, count = masked_lm_loss_sums(
        labels["masked_lm_ids"], labels["masked_lm_weights"], outputs["mlm_logits"]
    )
    mask = ops.cast(input_mask, "float32")
    xent = ops.binary_crossentropy(
        ops.cast(outputs["rtd_labels"], "float32"),
        ops.cast(outputs["rtd_logits"], "float32"),
        from_logits=True,
    )
    tokens = ops.sum(mask)
    replicas = backend.replica_count()
    if replicas > 1:
        count = backend.all_reduce_sum(count)
        tokens = backend.all_reduce_sum(tokens)
    mlm_loss = total / (count + 1e-5) * replicas
    rtd_loss = ops.sum(xent * mask) / ops.maximum(tokens, 1.0) * replicas
    return {
        "mlm_loss": mlm_loss,
        "rtd_loss": rtd_loss,
        "loss": mlm_loss + DISCRIMINATOR_WEIGHT * rtd_loss,
    }


def with_original_ids(inputs: dict[str, Any], labels: dict[str, Any]) -> tuple[dict, dict]:
    """A batch (inputs, labels) of pre-training records, packed or not, as `ElectraPretrainer`
    takes it: the original tokens `masked_lm_ids` among the inputs too, and packed rows'
    `cls_positions` left out (no sentence head reads them; a `tf.data` map function)."""
    inputs = {k: v for k, v in inputs.items() if k != "cls_positions"}
    return {**inputs, "masked_lm_ids": labels["masked_lm_ids"]}, labels


def real_tokens(inputs: dict[str, Any]) -> Any:
    """[B, S] 1 for the real tokens of a batch's inputs: `input_mask`, or for packed rows the
    tokens of an instance (`input_instance_ids` > 0)."""
    if "input_mask" in inputs:
        return inputs["input_mask"]
    return ops.cast(ops.greater(inputs["input_instance_ids"], 0), "int32")


def replace_tokens(
    input_word_ids: Any, masked_lm_positions: Any, masked_lm_ids: Any, sampled: Any
) -> tuple[Any, Any]:
    """(corrupted ids [B, S], replaced [B, S] float32): `sampled` [B, P] written at the real
    masked positions (those > 0: position 0 holds [CLS], which is never masked, and pads the
    positions), and where the result differs from the original tokens (`masked_lm_ids`)."""
    seq_length = ops.shape(input_word_ids)[1]
    real = ops.cast(masked_lm_positions > 0, "float32")  # (B, P)
    one_hot = ops.one_hot(masked_lm_positions, seq_length, dtype="float32") * real[..., None]
    at_masked = ops.max(one_hot, axis=1) > 0  # (B, S)

    def scatter(values):  # (B, P) -> (B, S) at the masked positions.
        spread = ops.sum(one_hot * ops.cast(values, "float32")[..., None], axis=1)
        return ops.cast(ops.round(spread), "int32")

    ids = ops.cast(input_word_ids, "int32")
    corrupted = ops.where(at_masked, scatter(sampled), ids)
    original = ops.where(at_masked, scatter(masked_lm_ids), ids)
    return corrupted, ops.cast(ops.not_equal(corrupted, original), "float32")


@keras.saving.register_keras_serializable(package="keras_bert")
class _SampleAndReplace(keras.layers.Layer):
    """Samples the generator's tokens (categorical sampling from its softmax, no gradient) and
    writes them into the input: (corrupted ids [B, S], replaced [B, S]) as `replace_tokens`."""

    def __init__(self, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def sample(self, logits: Any) -> Any:
        """int32 [B, P] tokens drawn from the softmax of `logits` [B, P, V] (float32), by the
        backend's own categorical sampler (TensorFlow's multinomial kernel: about a third of the
        time of Gumbel-max noise over every logit on CPU). Replacing it on an instance (e.g. by
        the argmax: the generator's most likely tokens) fixes the samples, as tests comparing
        two layouts of the same instances do."""
        flat = ops.reshape(logits, (-1, ops.shape(logits)[-1]))
        drawn = keras.random.categorical(flat, 1, dtype="int32", seed=self.seed_generator)
        return ops.reshape(drawn, ops.shape(logits)[:-1])

    def call(self, input_word_ids, masked_lm_positions, masked_lm_ids, mlm_logits):
        sampled = self.sample(ops.stop_gradient(ops.cast(mlm_logits, "float32")))
        return replace_tokens(input_word_ids, masked_lm_positions, masked_lm_ids, sampled)

    def compute_output_shape(self, ids_shape, *shapes):
        return ids_shape, ids_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "seed": self.seed}


@keras.saving.register_keras_serializable(package="keras_bert")
class ElectraPretrainer(keras.Model):
    """ELECTRA's generator and discriminator (the module docstring), trained jointly by `fit`.

    Reports `loss`, `mlm_loss` (the generator's), `rtd_loss`, `mlm_accuracy` and
    `rtd_accuracy` (replaced / original over the real tokens).

    Args:
        encoder: `BertEncoder`, the discriminator (the encoder kept after pre-training).
        generator_size: float in (0, 1]: the generator's width as a fraction of the encoder's.
        seed: int or None. Seed of the generator's sampling.
        packed: bool. Take packed rows (several instances per row, the module docstring)
            instead of one instance per row.

    Call arguments:
        inputs: dict of int32 [B, S] `input_word_ids` (masked), `input_mask`,
            `input_type_ids`, and [B, P] `masked_lm_positions`, `masked_lm_ids`; packed:
            `input_position_ids` and `input_instance_ids` [B, S] instead of `input_mask`.

    Returns:
        dict with `mlm_logits` [B, P, V], `rtd_logits` [B, S] (float32) and `rtd_labels`
        [B, S] (1.0 where the discriminator's input token was replaced).

    Example:
    >>> encoder = BertEncoder(BertConfig.preset("tiny", vocab_size=100))
    >>> pretrainer = ElectraPretrainer(encoder, generator_size=0.25, packed=True)
    >>> pretrainer.compile(optimizer="adam")
    """

    backbone_cls: ClassVar[type] = BertEncoder

    def __init__(
        self,
        encoder: BertEncoder,
        generator_size: float = 0.25,
        seed: int | None = None,
        packed: bool = False,
        **kwargs: Any,
    ) -> None:
        config, policy = encoder.config, encoder.dtype_policy
        shape = generator_shape(config, generator_size)
        init = utils.initializer(config.initializer_range)

        # === Layers ===
        project = keras.layers.Dense(
            shape["hidden_size"], kernel_initializer=init, dtype=policy, name="generator_project"
        )
        blocks = transformer_blocks(config.replace(**shape), policy, "generator_layer_")
        mlm_head = MaskedLMHead(
            encoder.embeddings,
            hidden_act=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            input_size=shape["hidden_size"],
            dtype=policy,
            name="generator_predictions",
        )
        rtd_dense = keras.layers.Dense(
            config.hidden_size,
            activation=utils.activation(config.hidden_act),
            kernel_initializer=init,
            dtype=policy,
            name="discriminator_dense",
        )
        rtd_out = keras.layers.Dense(
            1, kernel_initializer=init, dtype="float32", name="discriminator_predictions"
        )
        sampler = _SampleAndReplace(seed, name="sample_and_replace")

        # === Functional Model ===
        encoder.use_pooler(False)  # The discriminator reads every token; no sentence head.
        inputs = _electra_inputs(packed)
        x = project(_embed(encoder, inputs, packed))
        bias = _generator_attention_bias(inputs, packed, policy)
        for block in blocks:
            x = block(x, bias)
        mlm_logits = mlm_head(x, inputs["masked_lm_positions"])
        corrupted, replaced = sampler(
            inputs["input_word_ids"],
            inputs["masked_lm_positions"],
            inputs["masked_lm_ids"],
            mlm_logits,
        )
        sequence = _discriminate(encoder, inputs, corrupted, packed)
        rtd_logits = keras.layers.Reshape((-1,), dtype="float32", name="rtd_logits")(
            rtd_out(rtd_dense(sequence))
        )
        outputs = {"mlm_logits": mlm_logits, "rtd_logits": rtd_logits, "rtd_labels": replaced}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.generator_size = generator_size
        self.seed = seed
        self.packed = packed
        self.generator_layers = blocks
        self.generator_head = mlm_head
        self.sampler = sampler

        # === Metrics ===
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.rtd_loss_tracker = keras.metrics.Mean(name="rtd_loss")
        self.mlm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        self.rtd_accuracy = keras.metrics.BinaryAccuracy(name="rtd_accuracy", threshold=0.0)

    def compute_loss(
        self,
        x: Any = None,
        y: Any = None,
        y_pred: Any = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> Any:
        trackers = {"mlm_loss": self.mlm_loss_tracker, "rtd_loss": self.rtd_loss_tracker}
        return loss_to_minimize(self, electra_loss(y, y_pred, real_tokens(x)), y, trackers)

    def compute_metrics(self, x, y, y_pred, sample_weight=None) -> dict[str, Any]:
        self.mlm_accuracy.update_state(
            y["masked_lm_ids"], y_pred["mlm_logits"], sample_weight=y["masked_lm_weights"]
        )
        self.rtd_accuracy.update_state(
            y_pred["rtd_labels"], y_pred["rtd_logits"], sample_weight=real_tokens(x)
        )
        return self.get_metrics_result()

    def get_config(self) -> dict[str, Any]:
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "generator_size": self.generator_size,
            "seed": self.seed,
            "packed": self.packed,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ElectraPretrainer:
        encoder = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**{**config, "encoder": encoder})


def _electra_inputs(packed: bool) -> dict[str, Any]:
    """The pre-trainer's symbolic int32 inputs (the class docstring's, packed or not)."""
    int_input = lambda name: keras.Input(shape=(None,), dtype="int32", name=name)  # noqa: E731
    if packed:
        names = ("input_word_ids", "input_type_ids", *PACKED_INPUT_NAMES)
        inputs = {name: int_input(name) for name in names}
    else:
        inputs = encoder_inputs()
    for name in ("masked_lm_positions", "masked_lm_ids"):
        inputs[name] = int_input(name)
    return inputs


def _embed(encoder: BertEncoder, inputs: dict[str, Any], packed: bool) -> Any:
    """The shared embeddings of the (masked) input [B, S, H]; packed: per-instance positions."""
    positions = (inputs["input_position_ids"],) if packed else ()
    return encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"], *positions)


def _generator_attention_bias(inputs: dict[str, Any], packed: bool, policy: Any) -> Any:
    """The generator's additive attention bias: padding masked, or block-diagonal (packed)."""
    if packed:
        layer = _PackedAttentionBias(dtype=policy, name="generator_packed_attention_bias")
        return layer(inputs["input_instance_ids"])  # (B, 1, S, S)
    return _AttentionBias(dtype=policy, name="generator_attention_bias")(inputs["input_mask"])


def _discriminate(encoder: BertEncoder, inputs: dict[str, Any], corrupted: Any, packed: bool):
    """The discriminator's (the encoder's) sequence output [B, S, H] on the corrupted ids."""
    if packed:
        names = ("input_type_ids", *PACKED_INPUT_NAMES)
        rows = {"input_word_ids": corrupted, **{name: inputs[name] for name in names}}
        return encoder.encode_packed(rows)["sequence_output"]
    encoded = encoder(
        {
            "input_word_ids": corrupted,
            "input_mask": inputs["input_mask"],
            "input_type_ids": inputs["input_type_ids"],
        }
    )
    return encoded["sequence_output"]
