"""Quantization-aware fine-tuning (`--quantization_aware`): the `TrainingWrapper` that trains the
task model in float and, through `keras_bert.rewrites.fake_quant`, its fake-quantized twin (what
`--quantize=int8_integer_only` TFLite computes) to give the float model's answers. The twin is a
training-time copy of the model (`keras_bert.rewrites.encoder.substitute_encoder`) that shares
every weight with it: the task model itself has no quantization mode.

Each training step runs the model twice: in float (no dropout), moving the activation ranges (the
float model's, which the export measures on its calibration texts), and fake-quantized (with
dropout). The loss is the task's loss of the float outputs plus the mean squared difference of
the fake-quantized outputs from them (held fixed), so the weights learn the task and, through the
straight-through gradients of the rounding, to give the same outputs in 8 bits (self-distillation
of the float model into its quantized form, as TernaryBERT and BinaryBERT distill theirs). Q8BERT's
plain recipe, the task's loss of the fake-quantized outputs alone, was measured worse (README,
Integer TFLite): it trains the integer model, and the float model it leaves (what `model/` holds
and the labels are compared with) drifts from it.

The fake quantization lives only in the trainer's forward pass: the task model itself (what the
epochs' evaluation, `model/` and every export see) is the float model. The activation ranges
(`ActivationRanges`, moving averages) belong to the trainer: the training checkpoints hold them
and a resumed run continues them. The integer export calibrates on the training texts recorded
in `model/` as for any model, and measures each tensor's range as the mean of each text's min and
max: the statistic the ranges here average (`keras_bert.export.quantization.quantize_calibrated`).
"""

import types

from keras import ops

from keras_bert import backend
from keras_bert.rewrites import encoder as rewrite
from keras_bert.rewrites import fake_quant
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.trainer import TrainingWrapper

FLOAT_OUTPUTS = "float_outputs"  # Key of the float model's outputs in a training step's y_pred.


class QuantizationAwareTrainer(TrainingWrapper):
    """A `TrainingWrapper` whose forward pass fake-quantizes weights and activations.

    Args:
        task: a `keras_bert.tasks.definition.TaskDefinition`.
        model: the (float) task model.
        momentum: float. Of the activation ranges' moving averages.
    """

    def __init__(self, task, model, momentum=fake_quant.MOMENTUM, **kwargs):
        super().__init__(task, model, **kwargs)
        self.ranges = fake_quant.ActivationRanges(momentum, name="activation_ranges")
        # In a holder that Keras does not track: its weights are the model's.
        self._twin = types.SimpleNamespace(
            model=rewrite.substitute_encoder(model, rewrite.EncoderRewrite)
        )

    @property
    def twin(self):
        """The copy of the model whose encoder has the fake-quantization sites."""
        return self._twin.model

    def call(self, inputs, training=False):
        if not training:
            with fake_quant.quantization_aware(self.ranges):
                return self.twin(inputs, training=False)
        with fake_quant.quantization_aware(self.ranges, "observe"):  # Moves the ranges.
            reference = self.twin(inputs, training=False)
        with fake_quant.quantization_aware(self.ranges):
            quantized = self.twin(inputs, training=True)
        return {**quantized, FLOAT_OUTPUTS: reference}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The task's loss of the float outputs plus the mean squared difference of the
        fake-quantized outputs from them (held fixed): the float model learns the task, the
        integer one its answers."""
        y_pred = dict(y_pred)
        reference = y_pred.pop(FLOAT_OUTPUTS)
        loss = super().compute_loss(x, y, reference, sample_weight, training)
        match = sum(
            ops.mean(
                ops.square(
                    ops.cast(y_pred[k], "float32") - ops.stop_gradient(ops.cast(v, "float32"))
                )
            )
            for k, v in reference.items()
        )
        # tf.distribute sums the replicas' gradients: each adds its share of the mean.
        return loss + ops.cast(match, loss.dtype) / backend.replica_count()

    def initialize_ranges(self, inputs):
        """Makes the range variables, set to the float model's ranges on `inputs` (one eager
        forward pass)."""
        with fake_quant.quantization_aware(self.ranges, "initialize"):
            self.twin(inputs, training=False)


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
