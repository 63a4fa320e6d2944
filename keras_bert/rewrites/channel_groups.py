"""Channel groups: the residual stream and LayerNorm of `int8_integer_only` TFLite in int8.

Dimensions: T tokens (B*S), H hidden, G groups, n_g channels of group g.

BERT's residual stream has a few outlier channels (all-MiniLM-L6-v2 on MRPC: channel 99 reaches
217 after layer 0's feed-forward output, where the median channel reaches 1.4; Bondarenko et al.
2021). With one int8 scale per tensor their range erases every other channel of the residual
sums, LayerNorm's centered values and the feed-forward output, and LayerNorm's variance varies
over tokens from 0.4 to 125 (the tokens holding the outliers). `GroupedEncoder`, the export-time
copy of the encoder (`keras_bert.rewrites.encoder`), carries its residual stream as G tensors
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

>>> groups = calibrate(encoder, inputs)                                       # doctest: +SKIP
>>> copy = rewrite.substitute_encoder(model, GroupedEncoder, groups=groups)   # doctest: +SKIP
"""

import dataclasses
import functools
import math
import operator

import keras
import numpy as np
import tensorflow as tf

from keras_bert.layers.transformer import MASK_VALUE
from keras_bert.rewrites import encoder as rewrite
from keras_bert.rewrites import integer

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


def layer_norm(layer, parts, groups: ChannelGroups, recorder=None):
    """`layer` (a LayerNormalization over H) on the grouped tokens parts [[T, n_g]], per group.

    mean = sum_g parts[g] @ (1/H); c_g = parts[g] - mean; the variance v = sum_g c_g.c_g / H
    (BATCH_MATMULs), coarse and, at each of `LEVELS`, saturating at `NormBounds.bounds` times the
    level's factor; out_g = c_g * rsqrt(v + eps) * gamma_g + beta_g, v the narrowest level's sum
    in which no group saturates (else the coarse one). `recorder`: a `_Recorder` (calibration)
    that records each token's variance and its groups' shares."""
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
    bounds = groups.norms.get(layer.path)
    if recorder is not None:
        recorder.norm(layer.path, coarse, squares)
    inv = tf.math.rsqrt(coarse + epsilon)
    if bounds is not None:
        # From the widest level down: a token whose every group stays below the level's bounds
        # takes that level's sum. Each level's BATCH_MATMULs take other operands than the coarse
        # one's and each other's (c as a row or a column), so that the converter keeps them apart;
        # each saturates at its bound, where its MINIMUM's int8 grid ends
        # (`keras_bert.export.integer_flatbuffer.saturating_minimums`).
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
    recording = _RecordingEncoder(encoder, recorder)
    for x in inputs:
        recording(x, training=False)
    maxima = [np.mean(calls, 0) for calls in recorder.maxima.values()]
    groups = ChannelGroups(choose_groups(maxima))
    grouped = GroupedEncoder(encoder, groups, recorder=recorder)
    for x in inputs:
        grouped(x, training=False)
    norms = {}
    for path, (total, per_group) in recorder.sums.items():
        total, per_group = np.concatenate(total), np.concatenate(per_group)
        threshold = float(np.percentile(total, quantile))
        below = per_group[total < threshold]
        bounds = below.max(0) if len(below) else per_group.max(0)
        norms[path] = NormBounds(threshold, tuple(float(b) for b in np.maximum(bounds, 1e-6)))
    return ChannelGroups(groups.groups, norms)


class _RecordingEncoder(rewrite.EncoderRewrite):
    """The float encoder (eager) that records every LayerNorm input's channel maxima."""

    def __init__(self, encoder, recorder, **kwargs):
        super().__init__(encoder, **kwargs)
        self.recorder = recorder

    def layer_norm(self, layer, x):
        self.recorder.channels(layer.path, x)
        return layer(x)


# === The grouped encoder ===


@keras.saving.register_keras_serializable(package="keras_bert")
class GroupedEncoder(integer.IntegerEncoder):
    """The encoder (inference) with its residual stream in channel `groups` (see the module), its
    LayerNorms and attention mask in int8-friendly forms: the same outputs as the float encoder
    (up to float32 rounding).

    Args:
        encoder: the `BertEncoder` whose weights it uses.
        groups: `ChannelGroups` (`calibrate`).
        recorder: optional `_Recorder` (calibration's second pass).
    """

    def __init__(self, encoder, groups, recorder=None, **kwargs):
        super().__init__(encoder, activations="int8", **kwargs)
        self.groups = groups
        self.recorder = recorder

    def call(self, inputs, training=None, mask=None):
        groups = self.groups
        x = self.grouped_embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
        # The blocks take the mask itself (`grouped_block`), not the bias.
        keys = tf.expand_dims(tf.expand_dims(inputs["input_mask"], 1), 1)  # (B, 1, 1, S)
        layer_outputs = []
        for block in self.encoder.transformer_layers:
            x = self.grouped_block(block, x, keys)  # [(B, S, n_g)]
            layer_outputs.append(merge(x, groups))  # (B, S, H)
        # The pooler reads the [CLS] state per group (not the merged tensor's one int8 grid).
        pooler = self.encoder.pooler
        pooled = dense(
            pooler, [p[:, 0, :] for p in x], groups.groups, activation=pooler.activation
        )[0]
        return {
            "sequence_output": layer_outputs[-1],
            "pooled_output": pooled,
            "encoder_outputs": layer_outputs,
        }

    def grouped_embeddings(self, input_word_ids, input_type_ids):
        """The embeddings [[B, S, n_g]], each group looked up in its own columns of the tables
        (each its own constant, so each its own int8 grid: a slice or gather of one table keeps
        that table's grid)."""
        layer, groups = self.encoder.embeddings, self.groups
        batch, seq_length = tf.shape(input_word_ids)[0], tf.shape(input_word_ids)[1]
        tables = zip(
            *(
                split(table, groups)
                for table in (layer.word_embeddings, layer.token_type_embeddings)
            ),
            (p[:seq_length] for p in split(layer.position_embeddings, groups)),
        )
        parts = [
            tf.reshape(
                tf.gather(words, input_word_ids) + tf.gather(types, input_type_ids) + positions,
                [-1, n],
            )  # (B*S, n_g)
            for (words, types, positions), n in zip(tables, groups.sizes)
        ]
        parts = layer_norm(layer.layer_norm, parts, groups, self.recorder)
        return [tf.reshape(p, [batch, seq_length, n]) for p, n in zip(parts, groups.sizes)]

    def grouped_block(self, block, parts, key_mask):
        """A `TransformerBlock` (inference) on the residual stream in channel groups:
        parts [[B, S, n_g]] -> [[B, S, n_g]]; key_mask: the input mask [B, 1, 1, S] (int32,
        1 = real token) or None."""
        groups = self.groups
        batch, seq = tf.shape(parts[0])[0], tf.shape(parts[0])[1]
        tokens = [tf.reshape(p, [-1, n]) for p, n in zip(parts, groups.sizes)]  # (B*S, n_g)
        q, k, v = (
            block.split_heads(dense(layer, tokens, groups.groups)[0], batch, seq)
            for layer in (block.query, block.key, block.value)
        )  # (B, N, S, D)
        q = q * tf.cast(block.head_size**-0.5, q.dtype)
        scores = tf.matmul(q, k, transpose_b=True)  # (B, N, S, S)
        if key_mask is not None:
            # A padded key's score is set, not summed with -10000: LiteRT's int8 ADD of the
            # scores and a bias on a grid 137 times coarser gave the top of the scores' grid for
            # -10000 (seen on MiniLM). On that grid the set score is the grid's bottom, where it
            # keeps a little probability: the padded key's value is zeroed too.
            real = tf.not_equal(key_mask, 0)  # (B, 1, 1, S)
            scores = tf.where(real, scores, tf.constant(MASK_VALUE, scores.dtype))
            keep = integer.mask_lookup(key_mask, (0.0, 1.0), v.dtype)  # (B, 1, 1, S)
            v = v * tf.transpose(keep, [0, 1, 3, 2])  # (B, N, S, D) * (B, 1, S, 1)
        context = block.merge_heads(tf.matmul(tf.nn.softmax(scores, axis=-1), v))  # (B*S, H)
        attended = dense(block.attention_output, [context], None, groups.groups)
        tokens = layer_norm(
            block.attention_layer_norm,
            [t + a for t, a in zip(tokens, attended)],
            groups,
            self.recorder,
        )
        inner = dense(block.intermediate, tokens, groups.groups, None, block.activation)
        out = dense(block.output_dense, inner, None, groups.groups)
        tokens = layer_norm(
            block.output_layer_norm, [t + o for t, o in zip(tokens, out)], groups, self.recorder
        )
        return [tf.reshape(t, [batch, seq, n]) for t, n in zip(tokens, groups.sizes)]
