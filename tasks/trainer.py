"""`TaskTrainer`: the Keras model that the fine-tuning runner compiles and fits (the task's loss
averaged over the examples of all replicas); `keras_bert.tasks.finetuning` uses it,
`keras_bert.tasks.quantization_aware` and the distillation trainer extend it."""

import keras
from keras import ops

from keras_bert import backend


@keras.saving.register_keras_serializable(package="keras_bert")
class TaskTrainer(keras.Model):
    """Trains a task model with its task's loss, averaged over the examples of all replicas.

    Args:
        task: a `keras_bert.tasks.definition.TaskDefinition`.
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
        # tf.distribute: the global mean's share of this replica (Keras sums the replicas'
        # gradients). JAX's keras.distribution computes this on the global batch already.
        count = backend.all_reduce_sum(count)
        loss = total / ops.maximum(count, 1.0)
        for extra in self.model.losses:
            loss = loss + ops.cast(extra, loss.dtype)
        return loss
