"""Quantization-aware fine-tuning: fake-quantized weights and activations in the encoder's forward
pass, at the tensors that `--quantize=int8_integer_only` TFLite computes in int8.

The sites are in `keras_bert.rewrites.encoder.EncoderRewrite`, the training-time copy of the
encoder that `keras_bert.tasks.quantization_aware` trains through (sharing the model's weights):
the core layers know nothing of it.

Q8BERT's recipe (Zafrir et al. 2019) with TFLite's number formats: inside
`quantization_aware(ranges)` the layers round every such tensor to its 8-bit grid in the forward
pass and let gradients through unchanged inside the range (the straight-through estimator of
`tf.quantization.fake_quant_with_min_max_vars`):

- weights: dense kernels symmetric per output channel ([-127, 127], as TFLite's
  FULLY_CONNECTED); embedding tables, LayerNorm gamma and beta per tensor over their min and max;
- activations: asymmetric per tensor (255 steps, zero exact) over `ActivationRanges`, moving
  averages of each example's min and max in the float model (what the export measures on its
  calibration texts, `keras_bert.export.quantization.quantize_calibrated`), observed in a float
  forward pass of each training step ("observe" mode): the fake-quantized pass's own values
  would differ where rounding upstream moves them (a LayerNorm variance rounded to 0 sends its
  RSQRT to 1/sqrt(epsilon), where the export saturates at the float model's range);
- the softmax and tanh outputs at TFLite's fixed int8 ranges ([0, 1) in steps of 1/256,
  [-1, 1) in steps of 1/128).

The copy traces LayerNorm in the integer form (`layer_norm`) with a site after each of its ops.
Outside the scope every function here returns its input: the float model, its checkpoints and
exports are unchanged.

Dimensions: B batch; a site's tensor is [B, ...] or [B*S, ...] (rows of `batch` examples).

>>> ranges = ActivationRanges()                                   # doctest: +SKIP
>>> with quantization_aware(ranges, "initialize"):                # doctest: +SKIP
...     model(first_inputs)                                       # eager: makes the ranges
>>> with quantization_aware(ranges, "observe"):                   # doctest: +SKIP
...     model(inputs)                                             # float: moves the ranges
>>> with quantization_aware(ranges):                              # doctest: +SKIP
...     logits = model(inputs, training=True)                     # fake-quantized
"""

import contextlib
import contextvars
import re
from typing import Any

import keras
import tensorflow as tf

NUM_BITS = 8
# Fixed output ranges of TFLite's int8 kernels: SOFTMAX (scale 1/256, zero point -128) and TANH
# (scale 1/128, zero point 0).
SOFTMAX_RANGE = (0.0, 255.0 / 256.0)
TANH_RANGE = (-1.0, 127.0 / 128.0)
MOMENTUM = 0.95  # Of the moving averages of the activation ranges (per training step).
MODES = ("quantize", "observe", "initialize")  # Of `quantization_aware`.

# (ActivationRanges, mode) inside `quantization_aware()`, else None.
_SCOPE: contextvars.ContextVar[tuple[Any, str] | None] = contextvars.ContextVar(
    "keras_bert_quantization_aware", default=None
)


@keras.saving.register_keras_serializable(package="keras_bert")
class ActivationRanges(keras.layers.Layer):
    """The activation ranges of quantization-aware training: per site a (min, max) pair of
    non-trainable variables, moving averages of each example's min and max.

    A site's variables are made on its first call, which must run eagerly (`initialize`); they
    are attributes named after the site, so a training checkpoint saves and restores them by name.

    Args:
        momentum: float. new = momentum * old + (1 - momentum) * this batch's.
    """

    def __init__(self, momentum=MOMENTUM, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.sites = {}  # site name -> (min variable, max variable), in creation order.
        self.built = True

    def _variables(self, name):
        if name not in self.sites:
            if not tf.executing_eagerly():
                raise RuntimeError(
                    f"Quantization-aware site {name!r} has no range: run the model once eagerly "
                    f'in `quantization_aware(ranges, "initialize")` before tracing it.'
                )
            attribute = "range_" + re.sub(r"\W", "_", name)
            pair = tuple(
                self.add_weight(
                    name=f"{attribute}_{end}",
                    shape=(),
                    initializer="zeros",
                    trainable=False,
                    aggregation="mean",
                )
                for end in ("min", "max")
            )
            setattr(self, attribute + "_min", pair[0])  # Tracked by name for checkpoints.
            setattr(self, attribute + "_max", pair[1])
            self.sites[name] = pair
        return self.sites[name]

    def observe(self, name, x, batch, initialize=False):
        """Moves the range of site `name` toward x's (sets it to x's when `initialize`): the
        mean over the `batch` examples of each one's min and max."""
        low, high = self._variables(name)
        rows = tf.reshape(tf.cast(x, "float32"), [batch, -1])  # (B, everything else)
        seen = tf.reduce_mean(tf.reduce_min(rows, 1)), tf.reduce_mean(tf.reduce_max(rows, 1))
        for variable, value in zip((low, high), seen):
            if not initialize:
                value = self.momentum * variable.value + (1.0 - self.momentum) * value
            variable.assign(value)

    def range(self, name):
        """The (min, max) of site `name`."""
        low, high = self._variables(name)
        return low.value, high.value

    def get_config(self):
        config = super().get_config()
        config.update(momentum=self.momentum)
        return config


@contextlib.contextmanager
def quantization_aware(ranges: ActivationRanges, mode: str = "quantize"):
    """Within it the layers trace their integer forms with a site at every tensor the integer
    TFLite quantizes; at each site, by `mode`:

    - "quantize": weights and activations fake-quantized (see the module docstring), with the
      activation ranges of `ranges`;
    - "observe": nothing rounded (the float model), each site's range in `ranges` moved toward
      its values (the export calibrates on the float model: these are its ranges);
    - "initialize": as "observe", the ranges set to the values seen (an eager call: it makes the
      range variables).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    token = _SCOPE.set((ranges, mode))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def is_active() -> bool:
    """Whether `quantization_aware()` is active (in any mode)."""
    return _SCOPE.get() is not None


def _quantizing():
    scope = _SCOPE.get()
    return scope is not None and scope[1] == "quantize"


def fake_quant(x, low, high, narrow_range=False):
    """x rounded to the 8-bit grid of [low, high] in the forward pass, its gradient passed where
    low <= x <= high (TensorFlow's fake-quant op), in x's dtype.

    As TFLite's quantizer, the range is first widened to hold 0 (TensorFlow's op would instead
    shift a range beside 0 onto it, e.g. [0.36, 0.76] to [0, 0.4]), then nudged so that 0 is a
    grid point."""
    low = tf.minimum(tf.cast(low, "float32"), 0.0)
    high = tf.maximum(tf.cast(high, "float32"), low + 1e-6)  # [0, 0] -> [0, 1e-6].
    high = tf.maximum(high, 0.0)
    y = tf.quantization.fake_quant_with_min_max_vars(
        tf.cast(x, "float32"),
        low,
        high,
        num_bits=NUM_BITS,
        narrow_range=narrow_range,
    )
    return tf.cast(y, x.dtype)


def activation(x, name, batch):
    """Inside `quantization_aware()`, x [B or B*S, ...] fake-quantized over the range of site
    `name` ("quantize"), or x with the range observed ("observe", "initialize"); else x."""
    scope = _SCOPE.get()
    if scope is None:
        return x
    ranges, mode = scope
    if mode != "quantize":
        ranges.observe(name, tf.stop_gradient(x), batch, initialize=mode == "initialize")
        return x
    low, high = ranges.range(name)
    return fake_quant(x, low, high)


def fixed(x, bounds):
    """Inside `quantization_aware(mode="quantize")`, x fake-quantized over the fixed range
    `bounds` (`SOFTMAX_RANGE`, `TANH_RANGE`); else x."""
    return fake_quant(x, *bounds) if _quantizing() else x


def kernel(w):
    """Inside `quantization_aware(mode="quantize")`, a dense kernel [in, out] fake-quantized
    symmetrically per output channel over [-max |w|, max |w|] in 255 steps (TFLite's int8
    weights); else w."""
    if not _quantizing():
        return w
    bound = tf.stop_gradient(tf.maximum(tf.reduce_max(tf.abs(tf.cast(w, "float32")), 0), 1e-8))
    y = tf.quantization.fake_quant_with_min_max_vars_per_channel(
        tf.cast(w, "float32"), -bound, bound, num_bits=NUM_BITS, narrow_range=True
    )
    return tf.cast(y, w.dtype)


def constant(w, rows=None):
    """Inside `quantization_aware(mode="quantize")`, a weight used as an operand (embedding
    table, LayerNorm gamma or beta) fake-quantized per tensor over its min and max (or only
    `rows`, values gathered from it, over w's min and max); else w (or rows)."""
    x = w if rows is None else rows
    if not _quantizing():
        return x
    low = tf.stop_gradient(tf.reduce_min(w))
    high = tf.stop_gradient(tf.reduce_max(w))
    return fake_quant(x, low, high)


def layer_norm(layer, x, batch):
    """The integer-friendly LayerNorm as int8_integer_only TFLite computes it: every op's output
    on its own int8 grid (MEAN, SQUARED_DIFFERENCE, MEAN, RSQRT, MUL, SUB, MUL, ADD); x holds the
    rows of `batch` examples."""
    name = layer.gamma.path.rsplit("/", 1)[0]

    def quantized(value, site):
        return activation(value, f"{name}/{site}", batch)

    mean = quantized(tf.reduce_mean(x, -1, keepdims=True), "mean")
    squares = quantized(tf.math.squared_difference(x, tf.stop_gradient(mean)), "squares")
    variance = quantized(tf.reduce_mean(squares, -1, keepdims=True), "variance")
    inv = quantized(tf.math.rsqrt(variance + layer.epsilon), "rsqrt")
    inv = quantized(inv * constant(tf.cast(layer.gamma, x.dtype)), "inv")
    y = quantized(quantized(x - mean, "centered") * inv, "scaled")
    return quantized(y + constant(tf.cast(layer.beta, x.dtype)), "output")
