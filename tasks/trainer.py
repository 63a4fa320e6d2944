"""`TaskTrainer`: the Keras model that the fine-tuning runner compiles and fits (the task's loss
averaged over the examples of all replicas); `keras_bert.tasks.runner` uses it,
`keras_bert.tasks.quantization_aware` and the distillation trainer extend it."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_bert")
class TaskTrainer(keras.Model):
    """Trains a task model with its task's loss, averaged over the examples of all replicas.

    Args:
        task: a `keras_bert.tasks.task.Task`.
        model: the task model (`task.build_model(...)`); it is what gets saved and exported.
    """

    def __init__(self, task, model, **kwargs):
        super().__init__(**kwargs)
        self.task = task
        self.model = model
        self.built = True  # The task model is built; this wrapper adds no weights.

    @property
    def label_keys(self):
        """The FeatureSet labels the training batches carry (the task's)."""
        return self.task.label_keys

    def call(self, inputs, training=False):
        return self.model(inputs, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        total, count = self.task.loss_sums(y, y_pred)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            count = context.all_reduce("sum", count)
        # The global mean's share of this replica: Keras sums the replicas' gradients.
        loss = total / tf.maximum(count, 1.0)
        extra = self.model.losses
        if extra:
            loss = loss + tf.add_n([tf.cast(v, loss.dtype) for v in extra])
        return loss
