"""Channel groups: the residual stream and LayerNorm of `int8_integer_only` TFLite in int8.

Dimensions: T tokens (B*S), H hidden, G groups, n_g channels of group g.

BERT's residual stream has a few outlier channels (all-MiniLM-L6-v2 on MRPC: channel 99 reaches
217 after layer 0's feed-forward output, where the median channel reaches 1.4; Bondarenko et al.
2021). With one int8 scale per tensor their range erases every other channel of the residual
sums, LayerNorm's centered values and the feed-forward output, and LayerNorm's variance varies
over tokens from 0.4 to 125 (the tokens holding the outliers). Inside `grouped(groups)` (with
`integer.integer_friendly("int8")`) the encoder carries its residual stream as G tensors
[T, n_g], one per group of channels of similar range (per-embedding-group quantization, PEG,
Bondarenko et al. 2021), each on its own int8 grid:

- a matrix multiply that reads the stream sums partial products over the groups, one that
  writes it computes each group's columns apart (`dense`); the embedding tables (the position
  table too) are looked up per group of columns;
- LayerNorm (`layer_norm`) takes each token's mean as partial matrix multiplies and its variance
  as BATCH_MATMULs (c.c / H summed in int32: no int8 tensor of squares), on several grids: a
  coarse one over the whole calibrated range, and sums that saturate at the bounds of the tokens
  without outliers (`NormBounds`) times each of `LEVELS`; a token takes the narrowest sum in which
  no group saturated (SELECT_V2).

In float the grouped encoder computes what the plain one does (up to float32 rounding);
`calibrate` chooses the groups and the bounds from the float model on calibration inputs.

>>> groups = calibrate(encoder, inputs)                  # doctest: +SKIP
>>> with integer.integer_friendly(), grouped(groups):    # doctest: +SKIP
...     concrete = function.get_concrete_function()
"""

import contextlib
import contextvars
import dataclasses
import functools
import math
import operator

import numpy as np
import tensorflow as tf

RATIO = 4.0  # A group holds channels whose ranges (relative to the median) are within this ratio.
MAX_GROUPS = 4
FINE_QUANTILE = 90  # Percentile of the tokens' variances below which `NormBounds` are taken.
LEVELS = (1.0, 16.0)  # The saturating sums' bounds: `NormBounds.bounds` times each factor.


@dataclasses.dataclass(frozen=True)
class NormBounds:
    """Where one LayerNorm's saturating variance sums apply.

    Attributes:
        threshold: float. The `FINE_QUANTILE` percentile of the calibration tokens' variances.
        bounds: tuple of G floats. Each group's share of the variance saturates there (times a
            level's factor): the largest share among the calibration tokens below `threshold`.
    """

    threshold: float
    bounds: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class ChannelGroups:
    """A partition of the H hidden channels into groups, and each LayerNorm's `NormBounds`.

    Attributes:
        groups: tuple of int arrays, the channel indices of each group (smallest ranges first).
        norms: {LayerNormalization path: NormBounds}.
    """

    groups: tuple[np.ndarray, ...]
    norms: dict[str, NormBounds] = dataclasses.field(default_factory=dict)

    @property
    def sizes(self) -> list[int]:
        return [len(g) for g in self.groups]

    @property
    def inverse(self) -> np.ndarray:
        """Positions in the concatenated groups of channels 0..H-1."""
        return np.argsort(np.concatenate(self.groups)).astype(np.int32)


_GROUPS: contextvars.ContextVar[ChannelGroups | None] = contextvars.ContextVar(
    "keras_bert_channel_groups", default=None
)
_RECORDER: contextvars.ContextVar["_Recorder | None"] = contextvars.ContextVar(
    "keras_bert_channel_recorder", default=None
)


@contextlib.contextmanager
def grouped(groups: ChannelGroups):
    """Within it the encoder computes its residual stream in `groups` (see the module)."""
    token = _GROUPS.set(groups)
    try:
        yield
    finally:
        _GROUPS.reset(token)


def active() -> ChannelGroups | None:
    """The `ChannelGroups` of the enclosing `grouped()`, else None."""
    return _GROUPS.get()


def split(x, groups: ChannelGroups, axis=-1):
    """x's channels per group: [x[..., g] for each group] (columns of `axis`)."""
    return [tf.gather(x, g, axis=axis) for g in groups.groups]


def merge(parts, groups: ChannelGroups):
    """The groups' channels [..., n_g] back in their order [..., H]."""
    return tf.gather(tf.concat(parts, -1), groups.inverse, axis=-1)


def dense(layer, parts, groups_in=None, groups_out=None, activation=None):
    """`layer` (a Dense) on an input in channel groups, its output in channel groups.

    parts: [[T, n_k]], the input's channels per group of `groups_in` (a tuple of index arrays;
    None: one part, all channels). Returns [[T, m_g]], one per group of `groups_out` (None: one,
    all columns): sum over k of parts[k] @ kernel[k, g] plus bias[g], then `activation`."""
    kernel = tf.cast(layer.kernel, parts[0].dtype)
    bias = tf.cast(layer.bias, kernel.dtype)
    rows = [kernel] if groups_in is None else [tf.gather(kernel, k) for k in groups_in]
    outputs = []
    for columns in [None] if groups_out is None else groups_out:
        terms = [
            tf.matmul(p, w if columns is None else tf.gather(w, columns, axis=1))
            for p, w in zip(parts, rows)
        ]
        y = functools.reduce(operator.add, terms)
        y = tf.nn.bias_add(y, bias if columns is None else tf.gather(bias, columns))
        outputs.append(activation(y) if activation is not None else y)
    return outputs


def layer_norm(layer, parts, groups: ChannelGroups):
    """`layer` (a LayerNormalization over H) on the grouped tokens parts [[T, n_g]], per group.

    mean = sum_g parts[g] @ (1/H); c_g = parts[g] - mean; the variance v = sum_g c_g.c_g / H
    (BATCH_MATMULs), coarse and, at each of `LEVELS`, saturating at `NormBounds.bounds` times the
    level's factor; out_g = c_g * rsqrt(v + eps) * gamma_g + beta_g, v the narrowest level's sum
    in which no group saturates (else the coarse one)."""
    dtype = parts[0].dtype
    hidden = sum(groups.sizes)
    ones = [tf.fill([n, 1], tf.constant(1.0 / hidden, dtype)) for n in groups.sizes]
    mean = functools.reduce(operator.add, [tf.matmul(p, w) for p, w in zip(parts, ones)])  # (T, 1)
    centered = [p - mean for p in parts]
    # c / sqrt(H): the dot products below are each group's share of the variance. Kept below 255,
    # the ranges of these sums keep int8 scales below 1, which TFLite's integer comparisons need.
    shrink = tf.constant(1.0 / math.sqrt(hidden), dtype)
    rows = [tf.expand_dims(c * shrink, 1) for c in centered]  # (T, 1, n_g)
    squares = [tf.matmul(r, r, transpose_b=True) for r in rows]  # (T, 1, 1)
    coarse = functools.reduce(operator.add, squares)  # The variance.
    epsilon = tf.constant(layer.epsilon, dtype)
    recorder, bounds = _RECORDER.get(), groups.norms.get(layer.path)
    if recorder is not None:
        recorder.norm(layer.path, coarse, squares)
    inv = tf.math.rsqrt(coarse + epsilon)
    if bounds is not None:
        # From the widest level down: a token whose every group stays below the level's bounds
        # takes that level's sum. Each level's BATCH_MATMULs take other operands than the coarse
        # one's and each other's (c as a row or a column), so that the converter keeps them apart;
        # each saturates at its bound, where its MINIMUM's int8 grid ends
        # (`keras_bert.export.quantization.saturating_minimums`).
        columns = [tf.expand_dims(c * shrink, 2) for c in centered]  # (T, n_g, 1)
        operands = [  # c.c as (row, column) and as (column^T, column).
            lambda r, column: tf.matmul(r, column),
            lambda r, column: tf.matmul(column, column, transpose_a=True),
        ]
        for factor, dot in reversed(list(zip(LEVELS, operands))):
            limits = [tf.constant(bound * factor, dtype) for bound in bounds.bounds]
            sums = [
                tf.minimum(dot(r, column), limit) for r, column, limit in zip(rows, columns, limits)
            ]  # (T, 1, 1) each
            below = functools.reduce(tf.logical_and, [s < limit for s, limit in zip(sums, limits)])
            inv = tf.where(
                below, tf.math.rsqrt(functools.reduce(operator.add, sums) + epsilon), inv
            )
    inv = tf.reshape(inv, [-1, 1])  # (T, 1)
    gamma = tf.cast(layer.gamma, dtype)
    beta = tf.cast(layer.beta, dtype)
    return [
        c * (inv * tf.gather(gamma, g)) + tf.gather(beta, g)
        for c, g in zip(centered, groups.groups)
    ]


# === Calibration ===


class _Recorder:
    """What `calibrate` records from the float model: per LayerNorm input, each call's channel
    maxima of |x| (`channels`), and each token's variance and its groups' shares (`norm`)."""

    def __init__(self):
        self.maxima = {}  # path -> [array [H] per call]
        self.sums = {}  # path -> ([coarse [T]], [[T, G]])

    def channels(self, path, x):
        rows = np.abs(np.reshape(np.asarray(x, np.float64), [-1, np.shape(x)[-1]]))
        self.maxima.setdefault(path, []).append(rows.max(0))

    def norm(self, path, coarse, squares):
        total, per_group = self.sums.setdefault(path, ([], []))
        total.append(np.reshape(np.asarray(coarse), [-1]))
        per_group.append(np.concatenate([np.reshape(np.asarray(s), [-1, 1]) for s in squares], 1))


def record_channels(path, x):
    """Records x's channel maxima for `calibrate` (a LayerNorm input [..., H]), when recording."""
    recorder = _RECORDER.get()
    if recorder is not None and tf.executing_eagerly():
        recorder.channels(path, x)


def choose_groups(maxima, ratio=RATIO, max_groups=MAX_GROUPS):
    """Channel groups from channel maxima [sites, H] (each site's mean over calibration calls):
    a channel's score is its largest ratio to its site's median; group k holds the scores in
    [ratio^k, ratio^(k+1)) (the last group the rest). Empty groups are dropped."""
    maxima = np.asarray(maxima, np.float64)
    score = (maxima / np.maximum(np.median(maxima, axis=1, keepdims=True), 1e-12)).max(0)
    level = np.floor(np.log(np.maximum(score, 1.0)) / math.log(ratio)).astype(int)
    level = np.minimum(level, max_groups - 1)
    return tuple(
        np.flatnonzero(level == k).astype(np.int32) for k in range(max_groups) if (level == k).any()
    )


def calibrate(encoder, inputs, quantile=FINE_QUANTILE) -> ChannelGroups:
    """`ChannelGroups` for `encoder` (a `keras_bert.BertEncoder`) from a float pass over `inputs`
    (an iterable of its input dicts, one text each: no padding): the groups from the channel
    maxima of every LayerNorm input (`choose_groups`), then, from a grouped pass, each
    LayerNorm's `NormBounds` (threshold: the `quantile` percentile of the tokens' variances)."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("Channel groups need at least one calibration input.")
    recorder = _Recorder()
    token = _RECORDER.set(recorder)
    try:
        for x in inputs:
            encoder(x, training=False)
        maxima = [np.mean(calls, 0) for calls in recorder.maxima.values()]
        groups = ChannelGroups(choose_groups(maxima))
        with grouped(groups):
            for x in inputs:
                encoder(x, training=False)
    finally:
        _RECORDER.reset(token)
    norms = {}
    for path, (total, per_group) in recorder.sums.items():
        total, per_group = np.concatenate(total), np.concatenate(per_group)
        threshold = float(np.percentile(total, quantile))
        below = per_group[total < threshold]
        bounds = below.max(0) if len(below) else per_group.max(0)
        norms[path] = NormBounds(threshold, tuple(float(b) for b in np.maximum(bounds, 1e-6)))
    return ChannelGroups(groups.groups, norms)
