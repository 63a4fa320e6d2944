"""The task models' losses, as (sum, count) pairs: one definition for `fit` and the runner.

Each task model's `loss_sums(y, y_pred, sample_weight)` returns the sum of its per-example
(or per-token) losses and how many there are; `mean_over_replicas` divides by the count of all
replicas, so that a training step under `tf.distribute` makes the update of one device with
the global batch (Keras sums the replicas' gradients); on JAX `keras.distribution` computes the
loss on the global batch already.

Dimensions: B batch, S sequence, C classes.
"""

from typing import Any

from keras import ops

from keras_bert import backend


def sparse_xent_sums(labels: Any, logits: Any, weights: Any = None) -> tuple[Any, Any]:
    """(sum of softmax cross-entropies, count) for int labels [B, ...] and logits [B, ..., C].

    Labels < 0 (a token without a tag, `IGNORED_TAG`) are left out; `weights` [B] (per
    example, e.g. 0 for the padding documents of fixed shapes) multiply each example's terms.
    """
    labels = ops.cast(labels, "int32")
    mask = ops.cast(labels >= 0, "float32")
    if weights is not None:
        mask = mask * _per_example(weights, mask)
    xent = ops.sparse_categorical_crossentropy(
        ops.maximum(labels, 0), ops.cast(logits, "float32"), from_logits=True
    )
    return ops.sum(xent * mask), ops.sum(mask)


def squared_error_sums(scores: Any, predicted: Any, weights: Any = None) -> tuple[Any, Any]:
    """(sum of squared errors, count) of scores [B] against one-unit predictions [B, 1] (or
    [B]): no [B] x [B, 1] broadcast."""
    error = ops.reshape(ops.cast(predicted, "float32"), [-1]) - ops.reshape(
        ops.cast(scores, "float32"), [-1]
    )
    weights = ops.ones_like(error) if weights is None else _per_example(weights, error)
    return ops.sum(ops.square(error) * weights), ops.sum(weights)


def mean_over_replicas(total: Any, count: Any) -> Any:
    """`total` over the count summed over the `tf.distribute` replicas in sync (this replica's
    share of the global mean); over `count` elsewhere."""
    return total / ops.maximum(backend.all_reduce_sum(count), 1.0)


def _per_example(weights: Any, like: Any) -> Any:
    """Weights [B] shaped to broadcast over `like` [B, ...]."""
    weights = ops.cast(weights, "float32")
    shape = [-1] + [1] * (len(like.shape) - 1)
    return ops.reshape(weights, shape)
