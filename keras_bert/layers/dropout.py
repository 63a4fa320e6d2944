"""Dropout whose masks differ across tf.distribute replicas."""

import keras

from keras_bert import backend


@keras.saving.register_keras_serializable(package="keras_bert")
class ReplicaDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with a different mask on every `tf.distribute` replica.

    Keras draws dropout seeds from a `SeedGenerator` whose state variable is mirrored
    under `tf.distribute`, so every replica would drop the same units. There the replica
    id is folded into the drawn seed (`keras_bert.backend.replica_dropout`). Without a
    strategy (or with one replica), and on JAX and PyTorch, this is Keras' own dropout.

    Args:
        rate: float in [0, 1). Fraction of units to drop.
        seed: optional int.
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        if noise_shape is not None:
            raise ValueError("ReplicaDropout does not take noise_shape.")
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            dropped = backend.replica_dropout(inputs, self.rate, self.seed_generator)
            if dropped is not None:
                return dropped
        return super().call(inputs, training=training)
