"""Quantization-aware fine-tuning (`--quantization_aware`): the `TaskTrainer` that runs the task
model's training steps inside `keras_bert.layers.fake_quant.quantization_aware`, so that the
weights learn around the rounding of `--quantize=int8_integer_only` TFLite (Q8BERT).

Each training step runs the model twice: in float, moving the activation ranges (the float model's,
which the export measures), then fake-quantized, for the loss. The fake quantization lives only
in the trainer's forward pass: the task model itself (what the
epochs' evaluation, `model/` and every export see) is the float model. The activation ranges
(`ActivationRanges`, moving averages) belong to the trainer: the training checkpoints hold them
and a resumed run continues them. The integer export calibrates on the training texts recorded
in `model/` as for any model, and measures each tensor's range as the mean of each text's min and
max: the statistic the ranges here average (`keras_bert.export.quantization.measured_ranges`).
"""

from keras_bert.layers import fake_quant
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.runner import TaskTrainer


class QuantizationAwareTrainer(TaskTrainer):
    """A `TaskTrainer` whose forward pass fake-quantizes weights and activations.

    Args:
        task: a `keras_bert.tasks.task.Task`.
        model: the (float) task model.
        momentum: float. Of the activation ranges' moving averages.
    """

    def __init__(self, task, model, momentum=fake_quant.MOMENTUM, **kwargs):
        super().__init__(task, model, **kwargs)
        self.ranges = fake_quant.ActivationRanges(momentum, name="activation_ranges")

    def call(self, inputs, training=False):
        if training:  # The float model's ranges on this batch, then the fake-quantized pass.
            with fake_quant.quantization_aware(self.ranges, "observe"):
                self.model(inputs, training=False)
        with fake_quant.quantization_aware(self.ranges, "quantize"):
            return self.model(inputs, training=training)

    def initialize_ranges(self, inputs):
        """Makes the range variables, set to the float model's ranges on `inputs` (one eager
        forward pass)."""
        with fake_quant.quantization_aware(self.ranges, "initialize"):
            self.model(inputs, training=False)


def first_batch(config, train):
    """The inputs of the first training batch of a FeatureSet (epoch 0's batch plan)."""
    batches, padded = feature_lib.batch_plan(
        train.lengths,
        config.batch_size,
        shuffle=True,
        seed=config.seed,
        buckets=config.bucket_lengths(),
    )
    data = feature_lib.make_dataset(train, batches[:1], padded[:1], label_keys=())
    inputs, _ = next(iter(data))
    return inputs
