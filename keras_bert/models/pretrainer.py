"""BertPretrainer: the encoder with the masked-LM and next-sentence heads, loss and metrics.

Dimensions: B batch, P masked positions per sequence, V vocab, I instances per packed row.
Training data follows the original TFRecord feature names: inputs `input_word_ids`,
`input_mask`, `input_type_ids`, `masked_lm_positions`; labels `masked_lm_ids`,
`masked_lm_weights`, `next_sentence_labels`.

Packed rows (`packed=True`, several instances per row, `keras_bert.pretraining.packing`) replace
`input_mask` with `input_position_ids` and `input_instance_ids` [B, S] and add `cls_positions`
[B, I]; their labels `next_sentence_labels` [B, I] come with `next_sentence_weights` [B, I]
(1.0 for real instances). Each instance gets exactly the outputs and losses it gets alone.
"""

from __future__ import annotations

from typing import Any, ClassVar

import keras
from keras import ops

from keras_bert import backend
from keras_bert.layers import utils
from keras_bert.layers.heads import MaskedLMHead
from keras_bert.models.encoder import PACKED_INPUT_NAMES, BertEncoder, encoder_inputs

LABEL_NAMES = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def masked_lm_loss_sums(
    masked_lm_ids: Any, masked_lm_weights: Any, mlm_logits: Any
) -> tuple[Any, Any]:
    """(sum of weighted token cross-entropies, sum of weights) over the masked positions.

    Returned as sums so that `pretraining_loss` can divide by a count summed over replicas.
    """
    ids = ops.cast(masked_lm_ids, "int32")
    weights = ops.cast(masked_lm_weights, "float32")
    xent = ops.sparse_categorical_crossentropy(
        ids, ops.cast(mlm_logits, "float32"), from_logits=True
    )  # (B, P)
    return ops.sum(xent * weights), ops.sum(weights)


def pretraining_loss(labels: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """The paper's loss: MLM cross-entropy averaged over real masked positions, plus NSP.

    Args:
        labels: dict with `masked_lm_ids` [B, P], `masked_lm_weights` [B, P] (1.0 for real
            predictions, 0.0 for padding) and, with NSP, `next_sentence_labels` [B] or [B, 1]
            (0 = IsNext, 1 = NotNext, as in the original).
        outputs: dict with `mlm_logits` [B, P, V] and optionally `nsp_logits` [B, 2].
            Packed rows: `nsp_logits` [B, I, 2], labels [B, I] and `next_sentence_weights`
            [B, I] in `labels`: the NSP loss is the mean over real instances (of all replicas).

    Under `tf.distribute` with several replicas the MLM mean is over the GLOBAL masked positions
    (all replicas), as on one device: this replica's sum / the global count, times the replica
    count because Keras scales each replica's loss by 1 / replicas (`keras_bert.backend`). On JAX,
    `keras.distribution` computes the loss on the global batch, as one device does.

    Returns:
        dict of scalar float32 `loss`, `mlm_loss` and (with NSP) `nsp_loss`.
    """
    total, count = masked_lm_loss_sums(
        labels["masked_lm_ids"], labels["masked_lm_weights"], outputs["mlm_logits"]
    )
    replicas = backend.replica_count()
    if replicas > 1:
        count = backend.all_reduce_sum(count)
    mlm_loss = total / (count + 1e-5) * replicas  # The original's denominator.
    result = {"mlm_loss": mlm_loss, "loss": mlm_loss}
    if "nsp_logits" in outputs:
        nsp_loss = _next_sentence_loss(labels, outputs["nsp_logits"], replicas)
        result.update(nsp_loss=nsp_loss, loss=mlm_loss + nsp_loss)
    return result


def _next_sentence_loss(labels: dict[str, Any], nsp_logits: Any, replicas: int) -> Any:
    """Mean NSP cross-entropy over the rows, or over the weighted instances of packed rows."""
    nsp_labels = ops.reshape(ops.cast(labels["next_sentence_labels"], "int32"), (-1,))
    logits = ops.reshape(ops.cast(nsp_logits, "float32"), (-1, 2))
    xent = ops.sparse_categorical_crossentropy(nsp_labels, logits, from_logits=True)
    if "next_sentence_weights" not in labels:
        return ops.mean(xent)
    weights = ops.reshape(ops.cast(labels["next_sentence_weights"], "float32"), (-1,))
    count = ops.sum(weights)
    if replicas > 1:
        count = backend.all_reduce_sum(count)
    return ops.sum(xent * weights) / ops.maximum(count, 1.0) * replicas


def loss_to_minimize(
    model: keras.Model, losses: dict[str, Any], labels: dict[str, Any], trackers: dict[str, Any]
) -> Any:
    """`losses["loss"]` plus the model's regularization losses, scaled for the replicas; the
    `trackers` (loss name -> `keras.metrics.Mean`) updated with their losses on the way."""
    # Weighted by batch size, as Keras weights its own loss tracker: the empty batch
    # that ends a dataset of unknown length then leaves the means unchanged.
    batch_size = ops.cast(ops.shape(labels["masked_lm_ids"])[0], "float32")
    for name, tracker in trackers.items():
        tracker.update_state(losses[name], sample_weight=batch_size)
    total = losses["loss"]
    extra = model.losses  # Regularization losses, if a user added any.
    if extra:
        total = total + ops.sum(ops.stack([ops.cast(loss, total.dtype) for loss in extra]))
    # Keras sums gradients over replicas, so each replica's loss is scaled by
    # 1 / replicas (what Keras does for compiled losses).
    replicas = backend.replica_count()
    return total / replicas if replicas > 1 else total


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPretrainer(keras.Model):
    """Masked LM + next sentence prediction on a `BertEncoder`.

    The MLM output projection is tied to the encoder's word embeddings. `fit()` works
    with `(inputs, labels)` batches as described in the module docstring and reports
    `loss`, `mlm_loss`, `nsp_loss`, `mlm_accuracy`, `nsp_accuracy`.

    Args:
        encoder: `BertEncoder`.
        next_sentence: bool. Include the NSP head and loss (False gives the
            RoBERTa-style MLM-only objective).
        packed: bool. Take packed rows (see the module docstring and
            `BertEncoder.encode_packed`) instead of one instance per row.

    Call arguments:
        inputs: dict of encoder inputs plus `masked_lm_positions` int32 [B, P]; packed:
            `input_word_ids`, `input_type_ids`, `input_position_ids`, `input_instance_ids`
            [B, S], `masked_lm_positions` [B, P] and `cls_positions` [B, I].

    Returns:
        dict with `mlm_logits` [B, P, V] and, with NSP, `nsp_logits` [B, 2] (packed:
        [B, I, 2]) (float32).

    Example:
    >>> encoder = BertEncoder(BertConfig.preset("tiny", vocab_size=100))
    >>> pretrainer = BertPretrainer(encoder)
    >>> pretrainer.compile(optimizer="adam")
    """

    backbone_cls: ClassVar[type] = BertEncoder  # The encoder `from_preset` builds.

    def __init__(
        self,
        encoder: BertEncoder,
        next_sentence: bool = True,
        packed: bool = False,
        **kwargs: Any,
    ) -> None:
        config = encoder.config
        policy = encoder.dtype_policy

        # === Layers ===
        mlm_head = MaskedLMHead(
            encoder.embeddings,
            hidden_act=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            dtype=policy,
            name="cls_predictions",
        )
        nsp_head = (
            keras.layers.Dense(
                2,
                name="cls_seq_relationship",
                dtype="float32",
                kernel_initializer=utils.initializer(config.initializer_range),
            )
            if next_sentence
            else None
        )

        # === Functional Model ===
        encoder.use_pooler(next_sentence)  # MLM alone (RoBERTa's): no sentence head reads it.
        inputs, encoded = _encode(encoder, packed)
        outputs = {
            "mlm_logits": mlm_head(encoded["sequence_output"], inputs["masked_lm_positions"])
        }
        if nsp_head is not None:
            outputs["nsp_logits"] = nsp_head(encoded["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.encoder = encoder
        self.next_sentence = next_sentence
        self.packed = packed
        self.masked_lm_head = mlm_head
        self.next_sentence_head = nsp_head

        # === Metrics ===
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        if next_sentence:
            self.nsp_loss_tracker = keras.metrics.Mean(name="nsp_loss")
            self.nsp_accuracy = keras.metrics.SparseCategoricalAccuracy(name="nsp_accuracy")

    def compute_loss(
        self,
        x: Any = None,
        y: Any = None,
        y_pred: Any = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> Any:
        trackers = {"mlm_loss": self.mlm_loss_tracker}
        if self.next_sentence:
            trackers["nsp_loss"] = self.nsp_loss_tracker
        return loss_to_minimize(self, pretraining_loss(y, y_pred), y, trackers)

    def compute_metrics(
        self,
        x: dict[str, Any],
        y: dict[str, Any],
        y_pred: dict[str, Any],
        sample_weight: Any = None,
    ) -> dict[str, Any]:
        self.mlm_accuracy.update_state(
            y["masked_lm_ids"], y_pred["mlm_logits"], sample_weight=y["masked_lm_weights"]
        )
        if self.next_sentence:
            self.nsp_accuracy.update_state(
                ops.reshape(y["next_sentence_labels"], (-1,)),
                ops.reshape(y_pred["nsp_logits"], (-1, 2)),
                sample_weight=(
                    ops.reshape(y["next_sentence_weights"], (-1,))
                    if "next_sentence_weights" in y
                    else None
                ),
            )
        return self.get_metrics_result()

    @classmethod
    def from_preset(cls, preset: Any, **kwargs: Any) -> BertPretrainer:
        """The pre-trainer (encoder and pre-training heads) of a preset (`keras_bert.presets`),
        built as `cls` on its `backbone_cls`; kwargs as
        `keras_bert.checkpoints.load_pretrainer`'s (next_sentence=..., dtype=...)."""
        from keras_bert.checkpoints import from_preset

        return from_preset.load_pretrainer(cls, preset, **kwargs)

    def get_config(self) -> dict[str, Any]:
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "next_sentence": self.next_sentence,
            "packed": self.packed,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> BertPretrainer:
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


def _encode(encoder: BertEncoder, packed: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pre-trainer's symbolic inputs and the encoder's outputs on them (see `packed`)."""
    int_input = lambda name: keras.Input(shape=(None,), dtype="int32", name=name)  # noqa: E731
    if not packed:
        inputs = encoder_inputs()
        inputs["masked_lm_positions"] = int_input("masked_lm_positions")
        encoded = encoder(
            {k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
        )
        return inputs, encoded
    names = ("input_word_ids", "input_type_ids", *PACKED_INPUT_NAMES, "masked_lm_positions")
    inputs = {name: int_input(name) for name in (*names, "cls_positions")}
    return inputs, encoder.encode_packed(inputs, inputs["cls_positions"])
