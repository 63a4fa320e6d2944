"""The paper's optimizers (AdamW, LAMB, the original's AdamWeightDecay) with linear warmup,
linear decay and global-norm clipping.

As the original `optimization.py`: beta1 0.9, beta2 0.999, epsilon 1e-6, weight decay 0.01 not
applied to LayerNorm parameters and biases, learning rate rising linearly from 0 over the warmup
steps, then falling linearly to 0 at the last step, gradients clipped to global norm 1.0.
`AdamWeightDecay` is the original's optimizer itself (Adam without bias correction, decay inside
the update), the one its fine-tuning used; `AdamW` is Keras' (with bias correction).
Gradient accumulation uses the Keras optimizers' `gradient_accumulation_steps`.
"""

import re

import keras
import tensorflow as tf
from keras import ops

from keras_bert import backend
from keras_bert.training.choices import OPTIMIZERS

# Variables whose path matches this get no weight decay (the original's exclusion list).
NO_DECAY_PATTERN = r"LayerNorm|layer_norm|bias"


@keras.saving.register_keras_serializable(package="keras_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak_learning_rate`, then linear decay to 0.

    lr(t) = peak * t / warmup for t < warmup, else peak * (total - t) / (total - warmup),
    with t the update step (the original's schedule: decay to 0 at `num_train_steps`).

    Args:
        peak_learning_rate: float. The learning rate at the end of warmup.
        num_train_steps: int or None. Update steps of the whole run; lr is 0 from here on.
            None: set later with `set_length` (the task models' `fit` sets it to the steps of
            that fit).
        num_warmup_steps: int. Update steps of warmup (0 for none; None with the length).
        steps_per_update: int. Optimizer iterations per update step (the gradient
            accumulation steps: Keras optimizers count every micro-batch).

    Call arguments:
        step: scalar int. The optimizer's iteration counter.

    Returns:
        scalar float32 learning rate.
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0, steps_per_update=1):
        if steps_per_update < 1:
            raise ValueError(f"steps_per_update must be >= 1, got {steps_per_update}.")
        self.peak_learning_rate = float(peak_learning_rate)
        self.steps_per_update = int(steps_per_update)
        self.num_train_steps = self.num_warmup_steps = None
        if num_train_steps is not None:
            self.set_length(num_train_steps, num_warmup_steps)

    def set_length(self, num_train_steps, num_warmup_steps):
        """Sets the schedule's length: lr rises over `num_warmup_steps` update steps and reaches
        0 at `num_train_steps`.

        Raises:
            ValueError: unless 0 <= num_warmup_steps <= num_train_steps and num_train_steps > 0.
        """
        if num_train_steps <= 0 or not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(
                f"Need 0 <= num_warmup_steps ({num_warmup_steps}) <= num_train_steps "
                f"({num_train_steps}) and num_train_steps > 0."
            )
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def __call__(self, step):
        if self.num_train_steps is None:
            raise ValueError(
                "This WarmupLinearDecay has no length yet: a task model's fit sets it to the "
                "steps of that fit; else call set_length(num_train_steps, num_warmup_steps)."
            )
        step = ops.cast(ops.floor_divide(step, self.steps_per_update), "float32")
        peak, total, warmup = (
            self.peak_learning_rate,
            float(self.num_train_steps),
            float(self.num_warmup_steps),
        )
        warm = peak * step / max(warmup, 1.0)
        decay = peak * ops.maximum(total - step, 0.0) / max(total - warmup, 1.0)
        return ops.where(step < warmup, warm, decay)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "steps_per_update": self.steps_per_update,
        }


def sum_over_replicas(grads):
    """In a `tf.distribute` replica context with several replicas: the gradients summed over
    all replicas. Elsewhere (one replica; JAX, whose keras.distribution has one program over the
    global batch) the gradients as they are."""
    if not backend.is_tensorflow():
        return grads
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return grads
    present = [i for i, g in enumerate(grads) if g is not None]
    summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
    grads = list(grads)
    for i, g in zip(present, summed):
        grads[i] = g
    return grads


def dense_gradients(grads):
    """`tf.IndexedSlices` gradients (of `tf.gather`, e.g. embeddings) as dense tensors, rows
    gathered several times summed. Keras' global norm and Adam second moment would otherwise
    take the repeated rows' parts one by one (sum of squares, not square of the sum). Other
    backends' gradients are dense already."""
    if not backend.is_tensorflow():
        return grads
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


class _SumBeforeClipping:
    """Sum the replicas' gradients before clipping (Keras clips each replica's gradient
    and sums afterwards, which under tf.distribute is not the global-norm clipping of one
    device). The sum then replaces the optimizer's own all-reduce: one all-reduce in all.
    `sums_replicas` is False when a wrapping `LossScaleOptimizer` has summed already.
    Sparse gradients are made dense first (`dense_gradients`), as in the original, where
    TensorFlow's first multiply densified them: Keras 3 would otherwise square the parts of
    a row gathered several times one by one (the embeddings' gradients)."""

    sums_replicas = True

    def _clip_gradients(self, grads):
        grads = dense_gradients(grads)
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
class AdamWeightDecay(_SumBeforeClipping, keras.optimizers.Optimizer):
    """The original BERT optimizer (`AdamWeightDecayOptimizer` of google-research/bert).

    m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2;
    w -= lr * (m / (sqrt(v) + epsilon) + weight_decay_rate * w)  (the decay term only if decayed).

    Unlike `keras.optimizers.AdamW` there is no bias correction ("since this is not the standard
    Adam, the bias correction is omitted"), so early steps are larger by up to
    (1 - b1) / sqrt(1 - b2) ~ 3.2. The decay is part of the update, once per step; the base
    class' `weight_decay` stays None so Keras does not decay a second time. Variables whose path
    matches `no_decay_pattern`, or excluded with `exclude_from_weight_decay()`, get no decay.

    Args:
        learning_rate: float or `LearningRateSchedule` (e.g. `WarmupLinearDecay`).
        weight_decay_rate: float. Weight decay, inside the update (0 for none).
        beta_1: float. Decay of the first moment.
        beta_2: float. Decay of the second moment.
        epsilon: float. Added to sqrt(v).
        no_decay_pattern: str or None. Regular expression searched in each variable's path;
            matching variables get no decay (default: LayerNorm and bias, as the original).
        **kwargs: the base optimizer's arguments (`global_clipnorm`,
            `gradient_accumulation_steps`, `name`, ...), except `weight_decay`.

    Example:
    >>> opt = AdamWeightDecay(WarmupLinearDecay(2e-5, 1000, 100), global_clipnorm=1.0)
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    >>> model.compile(optimizer=opt, loss="mse")
    """

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        no_decay_pattern=NO_DECAY_PATTERN,
        **kwargs,
    ):
        if kwargs.pop("weight_decay", None) is not None:
            raise ValueError(
                "AdamWeightDecay takes `weight_decay_rate` (decay inside the update); "
                "`weight_decay` would make Keras decay a second time."
            )
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.no_decay_pattern = no_decay_pattern

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(var_list, ["m", "v"])

    def _decays(self, variable):
        """Whether `variable` (a Keras variable) gets weight decay."""
        excluded = self.no_decay_pattern and re.search(self.no_decay_pattern, variable.path)
        return bool(self.weight_decay_rate) and not excluded and self._use_weight_decay(variable)

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        gradient = ops.cast(gradient, variable.dtype)
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        update = ops.divide(m, ops.add(ops.sqrt(v), self.epsilon))  # No bias correction.
        if self._decays(self._trainable_variables[index]):
            update = ops.add(update, ops.multiply(variable, self.weight_decay_rate))
        self.assign_sub(variable, ops.multiply(ops.cast(learning_rate, variable.dtype), update))

    def get_config(self):
        config = super().get_config()
        del config["weight_decay"]  # Always None: the decay is `weight_decay_rate`.
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            no_decay_pattern=self.no_decay_pattern,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_bert")
class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` whose overflow check sees the summed gradient.

    Keras checks each replica's own gradient and then follows the first replica: an
    overflow on another replica would reach the weights as inf/NaN. Here the gradients are
    summed over replicas first (once; the inner optimizer of this module then does not sum
    again), so every replica skips the step if any overflowed, as one device would.
    """

    def __init__(self, inner_optimizer, **kwargs):
        super().__init__(inner_optimizer, **kwargs)
        inner_optimizer.sums_replicas = False

    def apply(self, grads, trainable_variables=None):
        return super().apply(sum_over_replicas(grads), trainable_variables)


def decay_excluded(variables):
    """The variables (LayerNorm and bias, by path) that get no weight decay."""
    return [v for v in variables if re.search(NO_DECAY_PATTERN, v.path)]


def create_optimizer(
    learning_rate,
    num_train_steps,
    num_warmup_steps,
    *,
    variables,
    optimizer="adamw",
    weight_decay=0.01,
    clip_norm=1.0,
    grad_accumulation_steps=1,
    loss_scale=False,
):
    """The optimizer of a run: warmup/decay schedule, weight decay, clipping, accumulation.

    Args:
        learning_rate: float. Peak learning rate (1e-4 in the paper).
        num_train_steps: int, or None: set later (`WarmupLinearDecay.set_length`).
        num_warmup_steps: int. Warmup update steps (10,000 in the paper); None with
            num_train_steps.
        variables: the model's trainable variables; those matching `NO_DECAY_PATTERN`
            (LayerNorm, bias) are excluded from weight decay.
        optimizer: "adamw" (Keras' AdamW; the pre-training default), "lamb" (large batches)
            or "adam_weight_decay" (the original's `AdamWeightDecay`, no bias correction).
        weight_decay: float. Weight decay rate.
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
    schedule = WarmupLinearDecay(
        learning_rate, num_train_steps, num_warmup_steps, steps_per_update=grad_accumulation_steps
    )
    accumulation = grad_accumulation_steps if grad_accumulation_steps > 1 else None
    common = dict(
        learning_rate=schedule,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        global_clipnorm=clip_norm or None,
        gradient_accumulation_steps=accumulation,
    )
    if optimizer == "adam_weight_decay":
        opt = AdamWeightDecay(weight_decay_rate=weight_decay, **common)
    else:
        opt = (AdamW if optimizer == "adamw" else Lamb)(weight_decay=weight_decay, **common)
    if weight_decay:
        opt.exclude_from_weight_decay(var_list=decay_excluded(variables))
    return LossScaleOptimizer(opt) if loss_scale else opt
