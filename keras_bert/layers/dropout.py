"""Dropout whose masks differ across tf.distribute replicas."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_bert")
class ReplicaDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with a different mask on every replica.

    Keras draws dropout seeds from a `SeedGenerator` whose state variable is mirrored
    under `tf.distribute`, so every replica would drop the same units. Here the replica
    id is folded into the drawn seed. Without a strategy (or with one replica) the
    masks are exactly Keras' own, so single-device runs are unchanged.

    Args:
        rate: float in [0, 1). Fraction of units to drop.
        seed: optional int.
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        if noise_shape is not None:
            raise ValueError("ReplicaDropout does not take noise_shape.")
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        # The same seed Keras' dropout would draw (int64 state -> int32, as Keras does).
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), "int32")
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            replica = tf.cast(context.replica_id_in_sync_group, "int32")
            seed = tf.random.experimental.stateless_fold_in(seed, replica)
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed)
