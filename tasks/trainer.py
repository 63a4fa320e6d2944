"""`TrainingWrapper`: what a fine-tuning run adds around the task model, as a Keras model
whose loss starts from the task model's own (`BertTask.task_loss`, the loss of `fit`).

The runner (`keras_bert.tasks.finetuning`) compiles and fits the task model itself; only runs that
change the forward pass or the loss wrap it: quantization-aware training
(`keras_bert.tasks.quantization_aware`) and distillation (`keras_bert.tasks.distillation`).
The wrapped task model is what gets saved and exported.
"""

import warnings

import keras


@keras.saving.register_keras_serializable(package="keras_bert")
class TrainingWrapper(keras.Model):
    """Trains a task model with its own loss (`model.task_loss`); subclasses add to it.

    Args:
        task: a `keras_bert.tasks.definition.TaskDefinition` (the run's data and labels).
        model: the task model (`task.build_model(...)`, a `keras_bert.models.task.BertTask`).
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
        return self.model.task_loss(y, y_pred, sample_weight)


class TaskTrainer(TrainingWrapper):
    """Deprecated alias of `TrainingWrapper` (the runner fits the task model itself now)."""

    def __init__(self, task, model, **kwargs):
        warnings.warn(
            "TaskTrainer is deprecated: the fine-tuning runner compiles and fits the task model "
            "itself (its loss is model.task_loss); wrap it in TrainingWrapper to add to that.",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(task, model, **kwargs)
