"""The few backend-specific needs of the layers and models, behind one small module.

The layers and models are written in `keras.ops` and run on TensorFlow, JAX and PyTorch. What
`keras.ops` does not say the same way on every backend lives here, chosen by
`keras.config.backend()`:

- `checked`: input checks (ids in range, sequence length). TensorFlow: an assert op that
  fails the graph with `InvalidArgumentError` (XLA drops it); JAX and PyTorch: a `ValueError`
  on concrete values (eager calls), nothing while JAX traces (`jit`), where an id out of range
  gives `jnp.take`'s fill value, NaN.
- `replica_dropout`: dropout masks that differ across `tf.distribute` replicas (TensorFlow's
  mirrored variables would give every replica the same Keras seed). Elsewhere: None, and the
  layer uses Keras' own dropout (`keras.distribution` on JAX shards the batch over devices and
  draws per-device masks from one seed already).
- `gather_rows`: rows of an embedding table. TensorFlow: `tf.gather` itself (`keras.ops.take`
  adds a fix for negative ids, `where(ids < 0, ...)`, which TFLite's converter miscompiles when the
  ids are a cast of booleans, as the SQuAD v2 preprocessing's type ids are: it folds the
  comparison into a boolean ZEROS_LIKE that no kernel takes); elsewhere `keras.ops.take`.
- `replica_count` / `all_reduce_sum`: the cross-replica sums of the pre-training loss under
  `tf.distribute`; 1 and the identity elsewhere (JAX's `keras.distribution` computes the loss
  on the global batch).

TensorFlow is imported only on the TensorFlow backend, inside these functions.
"""

from __future__ import annotations

import sys
from typing import Any

import keras
import numpy as np


def is_tensorflow() -> bool:
    """Whether Keras runs on the TensorFlow backend."""
    return keras.config.backend() == "tensorflow"


def _concrete(x: Any) -> np.ndarray | None:
    """x as a NumPy array when its values are known now (eager), else None (being traced)."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        if isinstance(x, jax.core.Tracer):
            return None
    elif backend == "torch":
        torch = sys.modules["torch"]  # Imported by Keras' torch backend.
        if torch.compiler.is_compiling():
            return None
    return np.asarray(keras.ops.convert_to_numpy(x))


def checked(value: Any, ok: Any, message: str) -> Any:
    """`value`, after checking that `ok` (a boolean scalar computed from it) holds.

    TensorFlow: `value` with a control dependency on an assert op (InvalidArgumentError with
    `message`). Other backends: ValueError(message) when `ok` is concrete and False.
    """
    if is_tensorflow():
        import tensorflow as tf

        check = tf.debugging.assert_equal(ok, True, message=message)
        with tf.control_dependencies([check]):
            return tf.identity(value)
    known = _concrete(ok)
    if known is not None and not bool(known):
        raise ValueError(message)
    return value


def ids_checked(ids: Any, size: int, what: str, limit_name: str) -> Any:
    """`ids` checked to lie in [0, size) (see `checked`); the message names `what`."""
    if is_tensorflow():  # TensorFlow's own ops: TFLite converts them (Keras' ops.all did not).
        import tensorflow as tf

        ids = tf.convert_to_tensor(ids)
        ok = tf.reduce_all((ids >= 0) & (ids < size))
    else:
        ok = keras.ops.all(keras.ops.logical_and(ids >= 0, ids < size))
    return checked(ids, ok, f"{what} has ids outside [0, {limit_name}={size}).")


def gather_rows(table: Any, ids: Any) -> Any:
    """table[ids]: rows of `table` [V, H] at int `ids` [...] -> [..., H] (ids checked already)."""
    if is_tensorflow():
        import tensorflow as tf

        return tf.gather(table, ids)
    return keras.ops.take(table, ids, axis=0)


def replica_dropout(inputs: Any, rate: float, seed_generator: Any) -> Any | None:
    """Dropout of `inputs` whose mask differs on every `tf.distribute` replica: Keras' seed with
    the replica id folded in. None when there is no such replica context (one replica, or not
    TensorFlow): then the caller uses Keras' own dropout."""
    if not is_tensorflow():
        return None
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync <= 1:
        return None
    # The seed Keras' dropout would draw (int64 state -> int32, as Keras does).
    seed = tf.cast(tf.math.floormod(seed_generator.next(), tf.int32.max - 1), "int32")
    replica = tf.cast(context.replica_id_in_sync_group, "int32")
    seed = tf.random.experimental.stateless_fold_in(seed, replica)
    return tf.nn.experimental.stateless_dropout(inputs, rate=rate, seed=seed)


def replica_count() -> int:
    """Replicas in sync of the current `tf.distribute` strategy; 1 elsewhere."""
    if not is_tensorflow():
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


def all_reduce_sum(value: Any) -> Any:
    """`value` summed over the `tf.distribute` replicas in sync (inside a replica context with
    several replicas); `value` itself elsewhere."""
    if not is_tensorflow():
        return value
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync <= 1:
        return value
    return context.all_reduce("sum", value)
