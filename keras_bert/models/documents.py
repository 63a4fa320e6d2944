"""Documents read in windows, classified whole: every window through the encoder, the windows'
logits pooled per document inside the model, so that training, evaluation and serving pool
alike (`keras_bert.tasks.long_text`, window_training="document").

Dimensions: W windows (flat over the batch), B documents, K windows of the longest document,
S sequence, H hidden, C classes.

- `WindowPooling`: [W, C] window logits and a [B, K] index of each document's windows -> [B, C].
- `DocumentClassifier`: a `BertClassifier`'s head (dropout + dense on `pooled_output`, or on
  the mean of the window's tokens) on every window, pooled per document ("mean", "max",
  "logsumexp", "first" or learned "attention").
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_bert.layers.dropout import ReplicaDropout
from keras_bert.models.encoder import BertEncoder, encoder_inputs
from keras_bert.models.task_models import (
    _check_encoder,
    _Classification,
    _dense,
    pooled_features,
)

POOLINGS = ("mean", "max", "logsumexp", "first", "attention")
WINDOW_INDEX = "window_index"  # The model input: int32 [B, K], -1 where a document has none.
_NEGATIVE = -1e9  # Below any logit or score: windows a document does not have.


@keras.saving.register_keras_serializable(package="keras_bert")
class WindowPooling(keras.layers.Layer):
    """Each document's logits from its windows'.

    Args:
        pooling: str. "mean", "max" (per class), "logsumexp" (per class, the log of the mean of
            the windows' exp(logit): a smooth max, between the mean and the max; each window's
            gradient is weighted by its softmax over the document's windows), "first" (the
            first window's), or "attention":
            the windows' logits weighted by a softmax over the document's window `scores` (a
            learned score of each window's [CLS] vector; the head being linear, this is the head
            applied to the attention-weighted [CLS] vectors).

    Call arguments:
        window_logits: float [W, C].
        window_index: int32 [B, K], the rows of `window_logits` of each document, in order, -1
            past its last (a document without windows, a padding one, gets zeros).
        scores: float [W, 1], with "attention" only.

    Returns:
        float32 [B, C].
    """

    def __init__(self, pooling: str = "mean", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}.")
        self.pooling = pooling

    def call(self, window_logits, window_index, scores=None):
        window_logits = ops.cast(window_logits, "float32")
        present = window_index >= 0  # (B, K)
        rows = ops.maximum(window_index, 0)
        logits = ops.take(window_logits, rows, axis=0)  # (B, K, C)
        mask = ops.expand_dims(ops.cast(present, "float32"), -1)  # (B, K, 1)
        any_window = ops.expand_dims(ops.cast(ops.any(present, axis=1), "float32"), 1)  # (B, 1)
        if self.pooling == "mean":
            return ops.sum(logits * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)
        if self.pooling == "max":
            return ops.max(ops.where(mask > 0, logits, _NEGATIVE), axis=1) * any_window
        if self.pooling == "logsumexp":
            count = ops.maximum(ops.sum(mask, axis=1), 1.0)  # (B, 1)
            total = ops.logsumexp(ops.where(mask > 0, logits, _NEGATIVE), axis=1)  # (B, C)
            return (total - ops.log(count)) * any_window
        if self.pooling == "first":
            return ops.take(logits, 0, axis=1) * any_window
        if scores is None:
            raise ValueError("WindowPooling(pooling='attention') needs the windows' scores.")
        score = ops.take(ops.reshape(ops.cast(scores, "float32"), [-1]), rows, axis=0)  # (B, K)
        weights = ops.softmax(ops.where(present, score, _NEGATIVE), axis=1)  # (B, K)
        return ops.sum(logits * ops.expand_dims(weights, -1) * mask, axis=1)  # (B, C)

    def compute_output_shape(self, window_logits_shape, window_index_shape, scores_shape=None):
        return (window_index_shape[0], window_logits_shape[-1])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "pooling": self.pooling}


@keras.saving.register_keras_serializable(package="keras_bert")
class DocumentClassifier(_Classification):
    """Document classification (or regression) from windows: `BertClassifier`'s head on every
    window (its `pooled_output`, or the mean of its tokens), pooled per document
    (`WindowPooling`).

    Args:
        encoder: `BertEncoder`.
        num_classes: int. Output units (1 for a regression score such as STS-B).
        dropout: float. Dropout before the dense layer.
        pooling: str, see `WindowPooling`; "attention" adds a dense scorer (H + 1 weights,
            initialized to zero: training starts from the mean).
        token_pooling: str. Each window's vector: "cls" (`pooled_output`) or "mean" (of its
            tokens), as `BertClassifier`'s `pooling`.

    Call arguments:
        inputs: dict of the windows' encoder inputs int32 [W, S] and `window_index` int32
            [B, K] (see `WindowPooling`).

    Returns:
        dict with `logits` float32 [B, C] (the documents') and `window_logits` float32 [W, C].

    Example:
    >>> model = DocumentClassifier(
    ...     BertEncoder(BertConfig.preset("tiny", vocab_size=100)), 2, pooling="attention"
    ... )
    """

    problem = "classification"
    text_inputs = ("text",)

    def __init__(
        self,
        encoder: BertEncoder,
        num_classes: int,
        dropout: float = 0.1,
        pooling: str = "mean",
        token_pooling: str = "cls",
        **kwargs: Any,
    ) -> None:
        _check_encoder(encoder)
        if int(num_classes) < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}.")
        inputs = encoder_inputs()
        inputs[WINDOW_INDEX] = keras.Input(shape=(None,), dtype="int32", name=WINDOW_INDEX)
        windows = {k: v for k, v in inputs.items() if k != WINDOW_INDEX}
        vectors = pooled_features(encoder, windows, token_pooling)  # (W, H)
        states = ReplicaDropout(dropout, name="classifier_dropout")(vectors)
        window_logits = _dense(int(num_classes), encoder, "classifier")(states)  # (W, C)
        scores = None
        if pooling == "attention":
            scores = keras.layers.Dense(
                1, dtype="float32", kernel_initializer="zeros", name="window_scorer"
            )(vectors)  # (W, 1)
        pool = WindowPooling(pooling, name="window_pooling")
        logits = pool(window_logits, inputs[WINDOW_INDEX], scores)  # (B, C)
        self._finish(encoder, inputs, {"logits": logits, "window_logits": window_logits}, **kwargs)
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)
        self.pooling = pooling
        self.token_pooling = token_pooling

    def _head_args(self) -> dict[str, Any]:
        return {
            **super()._head_args(),
            "pooling": self.pooling,
            "token_pooling": self.token_pooling,
        }

    def _default_metrics(self) -> Any:
        # None: Keras' metrics want a label for every output, and `window_logits` has none (the
        # runner measures documents on its evaluation splits).
        return None
