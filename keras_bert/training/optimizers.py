"""The paper's optimizer: AdamW (or LAMB) with linear warmup, linear decay and global-norm clipping.

As the original `optimization.py`: beta1 0.9, beta2 0.999, epsilon 1e-6, decoupled weight
decay 0.01 not applied to LayerNorm parameters and biases, learning rate rising linearly from 0
over the warmup steps, then falling linearly to 0 at the last step, gradients clipped to global
norm 1.0. Gradient accumulation uses the Keras optimizers' `gradient_accumulation_steps`.
"""

import re

import keras
import tensorflow as tf
from keras import ops

# Variables whose path matches this get no weight decay (the original's exclusion list).
NO_DECAY_PATTERN = r"LayerNorm|layer_norm|bias"
OPTIMIZERS = ("adamw", "lamb")


@keras.saving.register_keras_serializable(package="keras_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak_learning_rate`, then linear decay to 0.

    lr(t) = peak * t / warmup for t < warmup, else peak * (total - t) / (total - warmup),
    with t the update step (the original's schedule: decay to 0 at `num_train_steps`).

    Args:
        peak_learning_rate: float. The learning rate at the end of warmup.
        num_train_steps: int. Update steps of the whole run; lr is 0 from here on.
        num_warmup_steps: int. Update steps of warmup (0 for none).
        steps_per_update: int. Optimizer iterations per update step (the gradient
            accumulation steps: Keras optimizers count every micro-batch).

    Call arguments:
        step: scalar int. The optimizer's iteration counter.

    Returns:
        scalar float32 learning rate.
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0, steps_per_update=1):
        if num_train_steps <= 0 or not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(f"Need 0 <= num_warmup_steps ({num_warmup_steps}) <= num_train_steps "
                             f"({num_train_steps}) and num_train_steps > 0.")
        if steps_per_update < 1:
            raise ValueError(f"steps_per_update must be >= 1, got {steps_per_update}.")
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.steps_per_update = int(steps_per_update)

    def __call__(self, step):
        step = ops.cast(ops.floor_divide(step, self.steps_per_update), "float32")
        peak, total, warmup = self.peak_learning_rate, float(self.num_train_steps), float(self.num_warmup_steps)
        warm = peak * step / max(warmup, 1.0)
        decay = peak * ops.maximum(total - step, 0.0) / max(total - warmup, 1.0)
        return ops.where(step < warmup, warm, decay)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "steps_per_update": self.steps_per_update}


def sum_over_replicas(grads):
    """In a replica context with several replicas: the gradients summed over all replicas."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return grads
    present = [i for i, g in enumerate(grads) if g is not None]
    summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
    grads = list(grads)
    for i, g in zip(present, summed):
        grads[i] = g
    return grads


class _SumBeforeClipping:
    """Sum the replicas' gradients before clipping (Keras clips each replica's gradient
    and sums afterwards, which under tf.distribute is not the global-norm clipping of one
    device). The sum then replaces the optimizer's own all-reduce: one all-reduce in all.
    `sums_replicas` is False when a wrapping `LossScaleOptimizer` has summed already."""

    sums_replicas = True

    def _clip_gradients(self, grads):
        if self.sums_replicas:
            grads = sum_over_replicas(grads)
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)  # Already summed.


@keras.saving.register_keras_serializable(package="keras_bert")
class AdamW(_SumBeforeClipping, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` whose global-norm clipping sees the gradient of all replicas."""


@keras.saving.register_keras_serializable(package="keras_bert")
class Lamb(_SumBeforeClipping, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` whose global-norm clipping sees the gradient of all replicas."""


@keras.saving.register_keras_serializable(package="keras_bert")
class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` whose overflow check sees the summed gradient.

    Keras checks each replica's own gradient and then follows the first replica: an
    overflow on another replica would reach the weights as inf/NaN. Here the gradients are
    summed over replicas first (once; the inner `AdamW`/`Lamb` then does not sum again), so
    every replica skips the step if any overflowed, as one device would.
    """

    def __init__(self, inner_optimizer, **kwargs):
        super().__init__(inner_optimizer, **kwargs)
        inner_optimizer.sums_replicas = False

    def apply(self, grads, trainable_variables=None):
        return super().apply(sum_over_replicas(grads), trainable_variables)


def decay_excluded(variables):
    """The variables (LayerNorm and bias, by path) that get no weight decay."""
    return [v for v in variables if re.search(NO_DECAY_PATTERN, v.path)]


def create_optimizer(learning_rate, num_train_steps, num_warmup_steps, *, variables, optimizer="adamw",
                     weight_decay=0.01, clip_norm=1.0, grad_accumulation_steps=1, loss_scale=False):
    """The pre-training optimizer.

    Args:
        learning_rate: float. Peak learning rate (1e-4 in the paper).
        num_train_steps: int. Update steps of the run.
        num_warmup_steps: int. Warmup update steps (10,000 in the paper).
        variables: the model's trainable variables; those matching `NO_DECAY_PATTERN`
            (LayerNorm, bias) are excluded from weight decay.
        optimizer: "adamw" (the paper) or "lamb" (large batches).
        weight_decay: float. Decoupled weight decay rate.
        clip_norm: float or None. Global gradient norm clipping.
        grad_accumulation_steps: int. Micro-batches whose mean gradient makes one update.
        loss_scale: bool. Wrap in a dynamic `LossScaleOptimizer` (for mixed_float16).

    Returns:
        `keras.optimizers.Optimizer`.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {optimizer!r}; choose one of {OPTIMIZERS}.")
    if grad_accumulation_steps < 1:
        raise ValueError(f"grad_accumulation_steps must be >= 1, got {grad_accumulation_steps}.")
    schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps,
                                 steps_per_update=grad_accumulation_steps)
    common = dict(learning_rate=schedule, beta_1=0.9, beta_2=0.999, epsilon=1e-6, weight_decay=weight_decay,
                  global_clipnorm=clip_norm or None,
                  gradient_accumulation_steps=grad_accumulation_steps if grad_accumulation_steps > 1 else None)
    opt = AdamW(**common) if optimizer == "adamw" else Lamb(**common)
    if weight_decay:
        opt.exclude_from_weight_decay(var_list=decay_excluded(variables))
    return LossScaleOptimizer(opt) if loss_scale else opt
