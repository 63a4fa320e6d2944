"""BertEncoder: embeddings, L Transformer blocks and the pooler, as a functional keras.Model.

Dimensions: B batch, S sequence, H hidden.
Inputs and outputs use the TF Hub BERT names.
"""

from __future__ import annotations

from typing import Any

import keras

from keras_bert.config import BertConfig
from keras_bert.inputs import INPUT_NAMES
from keras_bert.layers import utils
from keras_bert.layers.embeddings import BertEmbeddings
from keras_bert.layers.heads import gather_positions
from keras_bert.layers.transformer import (
    TransformerBlock,
    attention_bias,
    packed_attention_bias,
)

# The extra inputs [B, S] of packed rows (several instances per row, `encode_packed`).
PACKED_INPUT_NAMES = ("input_position_ids", "input_instance_ids")


def encoder_inputs() -> dict[str, keras.KerasTensor]:
    """Symbolic int32 inputs [B, S] with the TF Hub names; S is left dynamic."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}


def transformer_blocks(config: BertConfig, policy: Any, prefix: str = "layer_") -> list:
    """The `config.num_hidden_layers` `TransformerBlock`s of `config`, named prefix + index."""
    return [
        TransformerBlock(
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            hidden_act=config.hidden_act,
            hidden_dropout_prob=config.hidden_dropout_prob,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            dtype=policy,
            name=f"{prefix}{i}",
        )
        for i in range(config.num_hidden_layers)
    ]


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEncoder(keras.Model):
    """The bidirectional Transformer encoder of BERT.

    Args:
        config: `BertConfig` (or its dict, or a preset name).

    Call arguments:
        inputs: dict of int32 [B, S] tensors `input_word_ids`, `input_mask`
            (1 for real tokens, 0 for padding) and `input_type_ids`.

    Returns:
        dict with `sequence_output` [B, S, H], `pooled_output` [B, H] (tanh dense on
        the [CLS] state) and `encoder_outputs` (list of L tensors [B, S, H]).

    Example:
    >>> encoder = BertEncoder(BertConfig.preset("tiny", vocab_size=100))
    >>> ids = np.array([[2, 5, 3, 0]], "int32")
    >>> out = encoder({"input_word_ids": ids, "input_mask": (ids > 0).astype("int32"),
    ...                "input_type_ids": np.zeros_like(ids)})
    >>> tuple(out["pooled_output"].shape)
    (1, 128)
    """

    def __init__(
        self, config: BertConfig | dict[str, Any] | str | None = None, **kwargs: Any
    ) -> None:
        config = _as_config(config)
        dtype = kwargs.pop("dtype", None)
        policy = (
            keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()
        )

        # === Layers ===
        embeddings = BertEmbeddings(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            dropout=config.hidden_dropout_prob,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            dtype=policy,
            name="embeddings",
        )
        blocks = transformer_blocks(config, policy)
        pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            name="pooler_dense",
            dtype=policy,
            kernel_initializer=utils.initializer(config.initializer_range),
        )

        # === Functional Model ===
        inputs = encoder_inputs()
        x = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])  # (B, S, H)
        bias = _AttentionBias(dtype=policy, name="attention_bias")(
            inputs["input_mask"]
        )  # (B, 1, 1, S)
        layer_outputs = []
        for block in blocks:
            x = block(x, bias)
            layer_outputs.append(x)
        cls = _FirstToken(dtype=policy, name="first_token")(x)  # (B, H)
        outputs = {
            "sequence_output": x,
            "pooled_output": pooler(cls),
            "encoder_outputs": layer_outputs,
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = policy  # Functional models drop `dtype`; keep it for get_config.

        # === Config ===
        self.config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler

    def use_pooler(self, used: bool) -> None:
        """Trains the pooler only when a head reads `pooled_output`.

        A head on the tokens (mean pooling, token tags, answer spans, MLM alone, ELECTRA) leaves
        the pooler without a gradient. TensorFlow and PyTorch then warn at every `fit` that
        "Gradients do not exist for variables ['pooler_dense/kernel', ...]"; on JAX its gradient
        is zero, so decoupled weight decay alone shrinks the unused kernel and the backends'
        fine-tuned encoders differ. The task models and pre-trainers call this as they build
        their heads (the last built decides; a model with heads of both kinds sets it True). The
        pooler keeps its weights either way: saved, exported and converted as before.
        """
        self.pooler.trainable = bool(used)

    def encode_packed(self, inputs: dict[str, Any], cls_positions: Any = None) -> dict[str, Any]:
        """The encoder's layers on packed rows: several instances per row, none seeing another.

        Every instance gets exactly the outputs it gets alone in a row of its own: its tokens
        take the positions of `input_position_ids` (restarting at 0) and attend only to the
        tokens of their own instance (a block-diagonal mask from `input_instance_ids`). Works on
        symbolic inputs (a functional model, as `BertPretrainer(packed=True)` builds) and eager
        ones; the weights are this encoder's.

        Args:
            inputs: dict of int32 [B, S] `input_word_ids`, `input_type_ids`,
                `input_position_ids` and `input_instance_ids` (1, 2, ... per instance, 0 for
                padding; it replaces `input_mask`).
            cls_positions: int32 [B, I], the row position of each instance's [CLS] (0 where a
                row holds fewer instances), or None for no `pooled_output` (a head that reads
                every token, as ELECTRA's discriminator).

        Returns:
            dict with `sequence_output` [B, S, H], `encoder_outputs` (L tensors [B, S, H]) and,
            with `cls_positions`, `pooled_output` [B, I, H], the pooler on each instance's [CLS].
        """
        policy = self.dtype_policy
        x = self.embeddings(
            inputs["input_word_ids"], inputs["input_type_ids"], inputs["input_position_ids"]
        )  # (B, S, H)
        bias = _PackedAttentionBias(dtype=policy)(inputs["input_instance_ids"])  # (B, 1, S, S)
        layer_outputs = []
        for block in self.transformer_layers:
            x = block(x, bias)
            layer_outputs.append(x)
        outputs = {"sequence_output": x, "encoder_outputs": layer_outputs}
        if cls_positions is not None:
            cls = _Positions(dtype=policy)(x, cls_positions)  # (B, I, H)
            outputs["pooled_output"] = self.pooler(cls)
        return outputs

    @classmethod
    def from_preset(cls, preset: Any, **kwargs: Any) -> BertEncoder:
        """The encoder of a preset (`keras_bert.presets`: a name, hf://, a directory or a .keras
        file), built as `cls`; kwargs as `keras_bert.checkpoints.load_encoder`'s (dtype=...)."""
        from keras_bert.checkpoints import from_preset

        return from_preset.load_backbone(cls, preset, **kwargs)

    def get_config(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> BertEncoder:
        config = dict(config)
        return cls(config=BertConfig.from_dict(config.pop("config")), **config)


@keras.saving.register_keras_serializable(package="keras_bert")
class _AttentionBias(keras.layers.Layer):
    """input_mask [B, S] -> additive attention bias [B, 1, 1, S] in the compute dtype."""

    def call(self, input_mask):
        return attention_bias(input_mask, self.compute_dtype)

    def compute_output_shape(self, shape):
        return (shape[0], 1, 1, shape[1])


@keras.saving.register_keras_serializable(package="keras_bert")
class _PackedAttentionBias(keras.layers.Layer):
    """input_instance_ids [B, S] -> block-diagonal attention bias [B, 1, S, S]."""

    def call(self, instance_ids):
        return packed_attention_bias(instance_ids, self.compute_dtype)

    def compute_output_shape(self, shape):
        return (shape[0], 1, shape[1], shape[1])


@keras.saving.register_keras_serializable(package="keras_bert")
class _Positions(keras.layers.Layer):
    """[B, S, H] and positions [B, I] -> the states at those positions [B, I, H]."""

    def call(self, x, positions):
        return gather_positions(x, positions)

    def compute_output_shape(self, x_shape, positions_shape):
        return (x_shape[0], positions_shape[1], x_shape[2])


@keras.saving.register_keras_serializable(package="keras_bert")
class _FirstToken(keras.layers.Layer):
    """[B, S, H] -> the [CLS] state [B, H]."""

    def call(self, x):
        return x[:, 0, :]

    def compute_output_shape(self, shape):
        return (shape[0], shape[2])


def _as_config(config: BertConfig | dict[str, Any] | str | None) -> BertConfig:
    if config is None:
        return BertConfig()
    if isinstance(config, BertConfig):
        return config
    if isinstance(config, str):
        return BertConfig.preset(config)
    if isinstance(config, dict):
        return BertConfig.from_dict(config)
    raise TypeError(
        f"config must be a BertConfig, dict or preset name, got {type(config).__name__}."
    )
