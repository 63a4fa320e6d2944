"""Fine-tuning models: a `BertEncoder` with the paper's thin task heads (§4).

Dimensions: B batch, K choices, S sequence, H hidden, C classes.
Every model takes the encoder inputs (`input_word_ids`, `input_mask`, `input_type_ids`) and
returns float32 logits, also under mixed precision.

- `BertClassifier`: dropout + dense on `pooled_output`, or on the mean of the tokens'
  `sequence_output` (`pooling="mean"`) (GLUE; one unit for regression).
- `BertSpanLabeler`: start and end logits over `sequence_output` (SQuAD).
- `BertTokenClassifier`: dropout + dense on every token of `sequence_output` (NER).
- `BertMultipleChoice`: one score per choice from each choice's `pooled_output` (SWAG).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from keras_bert.inputs import INPUT_NAMES
from keras_bert.layers import utils
from keras_bert.layers.dropout import ReplicaDropout
from keras_bert.layers.pooling import MaskedMeanPooling
from keras_bert.models import losses
from keras_bert.models.encoder import BertEncoder, encoder_inputs
from keras_bert.models.task import BertTask
from keras_bert.text import task_data

IGNORED_TAG = -1  # Token tags for raw-text fit: a packed token without a tag (special, padding).
POOLINGS = ("cls", "mean")  # A classifier's text vector: `pooled_output`, or the tokens' mean.


class _TaskModel(BertTask):
    """Shared config handling (in `BertTask`): the encoder is serialized with the model."""

    def _finish(
        self,
        encoder: BertEncoder,
        inputs: dict[str, keras.KerasTensor],
        outputs: dict[str, keras.KerasTensor],
        **kwargs: Any,
    ) -> None:
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder


class _Classification(_TaskModel):
    """Dropout + dense on an encoder output (see `_classify`); num_classes and dropout in the
    config."""

    def _head_args(self) -> dict[str, Any]:
        return {"num_classes": self.num_classes, "dropout": self.dropout}

    def loss_sums(self, y: Any, y_pred: Any, sample_weight: Any = None) -> tuple[Any, Any]:
        """Softmax cross-entropy of `logits` over the labelled examples (tokens), or for one
        unit (a regression score) the squared error."""
        if self.num_classes == 1:
            return losses.squared_error_sums(y["logits"], y_pred["logits"], sample_weight)
        return losses.sparse_xent_sums(y["logits"], y_pred["logits"], sample_weight)

    def _default_metrics(self) -> Any:
        if self.num_classes == 1:  # A regression score.
            return {"logits": ["mae"]}
        return super()._default_metrics()


def _dense(units: int, encoder: BertEncoder, name: str) -> keras.layers.Dense:
    return keras.layers.Dense(
        units,
        dtype="float32",
        name=name,
        kernel_initializer=utils.initializer(encoder.config.initializer_range),
    )


def pooled_features(encoder: BertEncoder, inputs: dict[str, Any], pooling: str) -> Any:
    """A classifier's vector of each text [B, H]: "cls", the encoder's `pooled_output` (the
    pooler on [CLS], trained by next-sentence prediction); "mean", the mean of `sequence_output`
    over the text's tokens (`MaskedMeanPooling`), as sentence-transformers checkpoints such as
    all-MiniLM-L6-v2 were trained to embed texts."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}.")
    encoder.use_pooler(pooling == "cls")
    outputs = encoder(inputs)
    if pooling == "cls":
        return outputs["pooled_output"]
    return MaskedMeanPooling(name="mean_pooling")(outputs["sequence_output"], inputs["input_mask"])


def _classify(
    model: _Classification,
    encoder: BertEncoder,
    output: str,
    num_classes: int,
    dropout: float,
    pooling: str = "cls",
    **kwargs: Any,
) -> None:
    """Builds `model` as dropout + dense(num_classes) on the encoder's `output` (for
    "pooled_output": `pooled_features` with `pooling`)."""
    _check_encoder(encoder)
    if int(num_classes) < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}.")
    inputs = encoder_inputs()
    if output == "pooled_output":
        features = pooled_features(encoder, inputs, pooling)  # (B, H)
    else:
        encoder.use_pooler(False)
        features = encoder(inputs)[output]
    states = ReplicaDropout(dropout, name="classifier_dropout")(features)
    logits = _dense(int(num_classes), encoder, "classifier")(states)
    model._finish(encoder, inputs, {"logits": logits}, **kwargs)
    model.num_classes = int(num_classes)
    model.dropout = float(dropout)


def center_regression_head(model: keras.Model, scores: Any) -> bool:
    """Starts a new regression head at the mean training score: the one-unit `classifier`'s
    bias set to the mean of `scores` while it is still zero (a head never trained; a fine-tuned
    or restored head is left alone).

    A head that starts at 0 against scores around 2.5 (STS-B's 0-5) spends the first steps of a
    short fine-tuning moving its bias under the clipped, warming-up updates, and where it ends is
    chaotic: all-MiniLM-L6-v2 on 1,000 STS-B pairs, 2 epochs, lr 5e-5 reached dev Pearson 0.37,
    0.72 and 0.23 with seeds 0, 1 and 2; started at the mean, 0.80, 0.81 and 0.80.

    Args:
        model: a task model with a `classifier` dense layer (`BertClassifier`,
            `DocumentClassifier`).
        scores: the training targets, any array-like of floats.

    Returns:
        bool, whether the bias was set (False: not one unit, no scores, or a trained bias).
    """
    try:
        head = model.get_layer("classifier")
    except ValueError:
        return False
    values = np.asarray(scores, np.float32).ravel()
    bias = ops.convert_to_numpy(head.bias) if head.use_bias else None
    if bias is None or bias.shape != (1,) or values.size == 0 or bias.any():
        return False
    head.bias.assign([values.mean()])
    return True


def _check_encoder(encoder: BertEncoder) -> None:
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"encoder must be a keras_bert BertEncoder, got {type(encoder).__name__}.")


@keras.saving.register_keras_serializable(package="keras_bert")
class BertClassifier(_Classification):
    """Sentence or sentence-pair classification (or regression) on `pooled_output`, or on the
    mean of the tokens' vectors.

    Args:
        encoder: `BertEncoder`.
        num_classes: int. Output units (1 for a regression score such as STS-B).
        dropout: float. Dropout before the dense layer (the paper: 0.1).
        pooling: str. "cls": the head reads `pooled_output` (the paper's); "mean": the mean of
            `sequence_output` over the non-padding tokens (`MaskedMeanPooling`), what
            sentence-transformers checkpoints (all-MiniLM-L6-v2) were trained for; it learns
            where one sentence of a long window decides (`keras_bert.tasks.long_text`).

    Returns:
        dict with `logits` float32 [B, C].

    Example:
    >>> model = BertClassifier(
    ...     BertEncoder(BertConfig.preset("tiny", vocab_size=100)), num_classes=3
    ... )
    """

    problem = "classification"
    text_inputs = ("text",)

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        dropout: float = 0.1,
        pooling: str = "cls",
        **kwargs: Any,
    ) -> None:
        _classify(self, encoder, "pooled_output", num_classes, dropout, pooling, **kwargs)
        self.pooling = pooling

    def _head_args(self) -> dict[str, Any]:
        return {**super()._head_args(), "pooling": self.pooling}

    def _packer(self) -> Any:
        # Its logits do not depend on the padded length: batches cut to their longest row.
        return task_data.packer(self.preprocessor, trim=True)

    def _label_arrays(self, y: Any) -> Any:
        return np.asarray(y, np.float32 if self.num_classes == 1 else np.int32)

    def fit(
        self, x: Any = None, y: Any = None, batch_size: int | None = None, **kwargs: Any
    ) -> keras.callbacks.History:
        """`BertTask.fit`; a regression head (one unit) never trained starts at the mean of the
        scores `y`, as the runner's does (`center_regression_head`)."""
        scores = y.get("logits") if isinstance(y, dict) else y  # As Keras' dict of targets.
        if self.num_classes == 1 and scores is not None:
            center_regression_head(self, np.asarray(scores, np.float32))
        return super().fit(x, y, batch_size=batch_size, **kwargs)


@keras.saving.register_keras_serializable(package="keras_bert")
class BertSpanLabeler(_TaskModel):
    """Answer-span scores: a start and an end vector dotted with every token (SQuAD, §4.2).

    Args:
        encoder: `BertEncoder`.

    Returns:
        dict with `start_logits` and `end_logits`, float32 [B, S].
    """

    problem = "span"
    text_inputs = ("question", "context")

    def __init__(self, encoder: BertEncoder, **kwargs: Any) -> None:
        _check_encoder(encoder)
        encoder.use_pooler(False)
        inputs = encoder_inputs()
        sequence = encoder(inputs)["sequence_output"]  # (B, S, H)
        logits = _dense(2, encoder, "span_logits")(sequence)  # (B, S, 2)
        start, end = _SplitLast(name="split_start_end")(logits)  # (B, S) each
        self._finish(encoder, inputs, {"start_logits": start, "end_logits": end}, **kwargs)

    def _label_arrays(self, y: Any) -> Any:
        start, end = y
        return (np.asarray(start, np.int32), np.asarray(end, np.int32))

    def _targets(self, y: Any) -> Any:
        if isinstance(y, (tuple, list)):
            return {"start_logits": y[0], "end_logits": y[1]}
        return super()._targets(y)

    def loss_sums(self, y: Any, y_pred: Any, sample_weight: Any = None) -> tuple[Any, Any]:
        """The mean of the start and end positions' cross-entropies (§4.2, the original's
        run_squad.py), per example."""
        start, count = losses.sparse_xent_sums(
            y["start_logits"], y_pred["start_logits"], sample_weight
        )
        end, _ = losses.sparse_xent_sums(y["end_logits"], y_pred["end_logits"], sample_weight)
        return (start + end) / 2.0, count

    def _default_metrics(self) -> Any:
        return {"start_logits": ["accuracy"], "end_logits": ["accuracy"]}


@keras.saving.register_keras_serializable(package="keras_bert")
class BertTokenClassifier(_Classification):
    """A label for every token (NER, §5.3): dropout + dense on `sequence_output`.

    Args:
        encoder: `BertEncoder`.
        num_classes: int. Tag count.
        dropout: float.

    Returns:
        dict with `logits` float32 [B, S, C].
    """

    problem = "token_classification"
    text_inputs = ("words",)

    def __init__(
        self, encoder: BertEncoder, num_classes: int, dropout: float = 0.1, **kwargs: Any
    ) -> None:
        _classify(
            self, encoder, "sequence_output", num_classes, dropout, **kwargs
        )  # logits (B, S, C)

    # Its loss: `_Classification.loss_sums` (untagged tokens, label -1, left out).


@keras.saving.register_keras_serializable(package="keras_bert")
class BertMultipleChoice(_TaskModel):
    """K sequences per example, one score each from a shared dense on [CLS] (SWAG, §4.4).

    Args:
        encoder: `BertEncoder`.
        dropout: float.

    Call arguments:
        inputs: dict of int32 [B, K, S] encoder inputs (K choices per example).

    Returns:
        dict with `logits` float32 [B, K] (softmax over the K choices).
    """

    problem = "multiple_choice"
    text_inputs = ("sent1", "sent2", "endings")

    def __init__(self, encoder: BertEncoder, dropout: float = 0.1, **kwargs: Any) -> None:
        _check_encoder(encoder)
        inputs = {
            name: keras.Input(shape=(None, None), dtype="int32", name=name) for name in INPUT_NAMES
        }
        flat = {
            name: _MergeChoices(name=f"merge_{name}")(x) for name, x in inputs.items()
        }  # (B*K, S)
        encoder.use_pooler(True)
        pooled = encoder(flat)["pooled_output"]  # (B*K, H)
        pooled = ReplicaDropout(dropout, name="classifier_dropout")(pooled)
        scores = _dense(1, encoder, "classifier")(pooled)  # (B*K, 1)
        logits = _SplitChoices(name="split_choices")(scores, inputs["input_word_ids"])  # (B, K)
        self._finish(encoder, inputs, {"logits": logits}, **kwargs)
        self.dropout = float(dropout)

    def _head_args(self) -> dict[str, Any]:
        return {"dropout": self.dropout}

    def _packer(self) -> Any:
        return task_data.choices_packer(self.preprocessor)


@keras.saving.register_keras_serializable(package="keras_bert")
class _SplitLast(keras.layers.Layer):
    """[B, S, 2] -> ([B, S], [B, S])."""

    def call(self, x):
        return x[..., 0], x[..., 1]

    def compute_output_shape(self, shape):
        return shape[:-1], shape[:-1]


@keras.saving.register_keras_serializable(package="keras_bert")
class _MergeChoices(keras.layers.Layer):
    """[B, K, S] -> [B*K, S]."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, shape):
        return (None, shape[-1])


@keras.saving.register_keras_serializable(package="keras_bert")
class _SplitChoices(keras.layers.Layer):
    """Scores [B*K, 1] and the choices' ids [B, K, S] -> logits [B, K]."""

    def call(self, scores, ids):
        return ops.reshape(scores, (ops.shape(ids)[0], ops.shape(ids)[1]))

    def compute_output_shape(self, scores_shape, ids_shape):
        return tuple(ids_shape[:2])
