"""Encoded features of a fine-tuning split and their batches: bucketed by length, padded per batch.

Every task turns its examples into a `FeatureSet`: token ids as ragged rows (no padding), labels
per feature or per token, and host-side data for post-processing. `batch_plan` groups features of
similar length into batches (a NumPy plan: deterministic for a seed and an epoch, so a resumed run
skips exactly the batches it has trained on), and `make_dataset` turns the plan into a `tf.data`
pipeline that pads each batch only to its own longest sequence, or to the smallest of a few fixed
lengths (`buckets`) where every new shape compiles anew (XLA, TPU).

Dimensions: N features, K choices, L tokens (ragged), S padded length, B batch, R replicas.
"""

import dataclasses
import functools
import weakref
from typing import Any

import numpy as np
import tensorflow as tf

# Labels of padded positions and of ignored tokens (NER: pieces after a word's first).
IGNORE_LABEL = -100
# Features sorted by length together, in multiples of the batch size (training).
SORT_WINDOW_BATCHES = 50
# Fixed padded lengths for XLA and TPU, capped by the run's seq_length.
DEFAULT_BUCKETS = (32, 64, 128, 256, 384, 512)


@dataclasses.dataclass
class FeatureSet:
    """The features of one split.

    Args:
        inputs: dict name -> int32 `tf.RaggedTensor` [N, (L)], or [N, K, (L)] for multiple
            choice: at least `input_word_ids` and `input_type_ids` (`input_mask` is made
            when batching: 1 on every real token).
        labels: dict name -> `np.ndarray` [N, ...] (one label per feature) or int32
            `tf.RaggedTensor` [N, (L)] (one per token, `IGNORE_LABEL` where none). Empty
            for unlabelled splits.
        example_index: int `np.ndarray` [N], the example each feature comes from (SQuAD
            windows: several features per example); default one feature per example.
        extras: host-side data for post-processing (offsets, token maps), never batched.
    """

    inputs: dict
    labels: dict = dataclasses.field(default_factory=dict)
    example_index: np.ndarray | None = None
    extras: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for name in ("input_word_ids", "input_type_ids"):
            if name not in self.inputs:
                raise ValueError(f"FeatureSet inputs need {name!r}, got {sorted(self.inputs)}.")
        n = self.num_features
        for name, value in list(self.inputs.items()) + list(self.labels.items()):
            rows = value.nrows() if isinstance(value, tf.RaggedTensor) else len(value)
            if int(rows) != n:
                raise ValueError(f"Feature {name!r} has {int(rows)} rows, input_word_ids has {n}.")
        if self.example_index is None:
            self.example_index = np.arange(n)

    @property
    def num_features(self):
        return int(self.inputs["input_word_ids"].nrows())

    @functools.cached_property
    def lengths(self):
        """int `np.ndarray` [N]: tokens per feature (the longest choice for multiple choice);
        computed once (batch plans and predictions read it every epoch)."""
        ids = self.inputs["input_word_ids"]
        lengths = ids.row_lengths(axis=ids.ragged_rank)  # (N,) or (N, (K))
        if ids.ragged_rank == 2:  # The longest of each feature's K choices.
            lengths = tf.reduce_max(lengths, axis=1)
        return lengths.numpy()


def padded_length(max_length, buckets=None):
    """The padded length of a batch whose longest feature has `max_length` tokens: itself, or
    the smallest bucket that holds it (the largest bucket when none does)."""
    if not buckets:
        return int(max_length)
    fitting = [b for b in sorted(buckets) if b >= max_length]
    return int(fitting[0] if fitting else max(buckets))


def batch_plan(
    lengths, batch_size, *, shuffle=False, seed=0, epoch=0, drop_remainder=False, buckets=None
):
    """Groups features into batches of similar length.

    Training (`shuffle=True`): a permutation seeded by (seed, epoch), sorted by length within
    windows of `SORT_WINDOW_BATCHES` batches, cut into batches whose order is shuffled again.
    Evaluation: all features sorted by length (least padding), order kept for ties.

    Args:
        lengths: int array [N], tokens per feature.
        batch_size: int, features per (global) batch.
        shuffle: bool. Training order as above; otherwise sorted.
        seed, epoch: ints seeding the training order (the same plan for the same pair).
        drop_remainder: bool. Drop a last batch smaller than `batch_size`.
        buckets: optional fixed padded lengths (see `padded_length`).

    Returns:
        (batches, padded): a list of int index arrays, and int array [num_batches] of each
        batch's padded length.
    """
    lengths = np.asarray(lengths)
    n = len(lengths)
    if shuffle:
        rng = np.random.default_rng([seed, epoch])
        order = rng.permutation(n)
        window = batch_size * SORT_WINDOW_BATCHES
        order = (
            np.concatenate(
                [
                    chunk[np.argsort(lengths[chunk], kind="stable")]
                    for chunk in np.split(order, range(window, n, window))
                ]
            )
            if n
            else order
        )
    else:
        order = np.argsort(lengths, kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if drop_remainder and batches and len(batches[-1]) < batch_size:
        batches = batches[:-1]
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    padded = np.array([padded_length(lengths[b].max(), buckets) for b in batches], dtype=np.int64)
    return batches, padded


def make_dataset(
    features,
    batches,
    padded,
    *,
    num_replicas=1,
    replica_range=None,
    pad_batch_to=None,
    label_keys=None,
):
    """A `tf.data.Dataset` of the planned batches: (inputs, labels) dicts of dense tensors.

    Args:
        features: `FeatureSet`.
        batches, padded: a `batch_plan`.
        num_replicas: int. Replicas in sync; each global batch yields one element per replica
            of this pipeline, padded to the global batch's length (TPU replicas share shapes).
        replica_range: (first, last) replicas fed by this input pipeline (default all).
        pad_batch_to: int or None. Pad every element to this many rows with empty features
            (input_mask 0; evaluation under XLA/TPU, where the batch size must be static).
        label_keys: label names to include (default all of `features.labels`).

    Returns:
        `tf.data.Dataset` of (inputs, labels); inputs `input_word_ids`, `input_mask`,
        `input_type_ids` int32 [B, S] (or [B, K, S]); labels as in the FeatureSet,
        per-token labels padded with `IGNORE_LABEL` to [B, S].
    """
    first, last = replica_range or (0, num_replicas)
    index_rows, lengths = [], []
    for b, s in zip(batches, padded):
        for r in range(first, last):
            index_rows.append(b[r::num_replicas])
            lengths.append(s)
    label_keys = list(features.labels) if label_keys is None else list(label_keys)
    n = features.num_features
    # One empty feature at index N pads batches to a static size.
    inputs = {k: _append_empty(v) for k, v in features.inputs.items()}
    labels = {k: _append_empty(features.labels[k]) for k in label_keys}
    if pad_batch_to:
        index_rows = [
            np.concatenate([i, np.full(pad_batch_to - len(i), n, i.dtype)]) for i in index_rows
        ]
    index = tf.RaggedTensor.from_row_lengths(
        np.concatenate(index_rows).astype(np.int64) if index_rows else np.zeros([0], np.int64),
        np.array([len(i) for i in index_rows], dtype=np.int64),
    )
    data = tf.data.Dataset.from_tensor_slices((index, np.array(lengths, dtype=np.int64)))

    def gather(idx, length):
        x = {}
        for name, value in inputs.items():
            rows = tf.gather(value, idx)  # (B, (L)) or (B, K, (L))
            x[name] = _to_dense(rows, length, 0)
            if name == "input_word_ids":
                x["input_mask"] = _to_dense(tf.ones_like(rows), length, 0)
        y = {}
        for name, value in labels.items():
            rows = tf.gather(value, idx)
            y[name] = (
                _to_dense(rows, length, IGNORE_LABEL) if isinstance(rows, tf.RaggedTensor) else rows
            )
        return x, y

    return data.map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(
        tf.data.AUTOTUNE
    )


def _append_empty(value):
    """`value` with one more row: empty tokens, or zeros for a per-feature label."""
    if isinstance(value, tf.RaggedTensor):
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], value.dtype), [0])
        if value.ragged_rank == 2:  # (N, K, (L)): K empty choices.
            k = int(value.bounding_shape()[1]) if value.nrows() > 0 else 1
            empty = tf.RaggedTensor.from_row_lengths(
                tf.RaggedTensor.from_row_lengths(
                    tf.zeros([0], value.dtype), tf.zeros([k], tf.int64)
                ),
                [k],
            )
        return tf.concat([value, empty], axis=0)
    value = np.asarray(value)
    return np.concatenate([value, np.zeros((1,) + value.shape[1:], value.dtype)])


def _to_dense(rows, length, pad):
    """Ragged rows [B, (L)] or [B, K, (L)] -> dense [B, S] or [B, K, S], cut or padded to
    `length`."""
    shape = tf.stack(
        [tf.constant(-1, tf.int64)] * (rows.shape.rank - 1) + [tf.cast(length, tf.int64)]
    )
    dense = rows.to_tensor(default_value=tf.cast(pad, rows.dtype), shape=shape)
    return tf.ensure_shape(dense, [None] * rows.shape.rank)


def encode_texts(tokenizer, seq_length, text_a, text_b=None, batch_size=512):
    """Tokenizes and packs texts in `tf.data` ([CLS] A [SEP] (B [SEP]), the original's
    longest-first truncation to `seq_length`), without padding.

    Args:
        tokenizer: `keras_bert.text.BertTokenizer`.
        seq_length: int, the longest packed sequence.
        text_a: list of str. text_b: list of str, or None for single texts.
        batch_size: int, texts tokenized per `tf.data` batch.

    Returns:
        dict with int32 `tf.RaggedTensor`s [N, (L)] `input_word_ids` and `input_type_ids`.
    """
    columns = (list(text_a),) if text_b is None else (list(text_a), list(text_b))
    if not columns[0]:
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
        return {"input_word_ids": empty, "input_type_ids": empty}
    pack = _pack_function(tokenizer, seq_length, len(columns))
    data = (
        tf.data.Dataset.from_tensor_slices(columns)
        .batch(batch_size)
        .map(pack, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    )
    parts = list(data)
    return {
        k: tf.concat([p[k] for p in parts], axis=0) for k in ("input_word_ids", "input_type_ids")
    }


_PACK_FUNCTIONS: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = (
    weakref.WeakKeyDictionary()
)  # tokenizer -> {(seq_length, segments): tf.function}


def _pack_function(tokenizer, seq_length, segments):
    """A `tf.function` tokenizing and packing a batch of texts, traced once per tokenizer and
    shape: every `tf.data` pipeline of `encode_texts` then calls the same graph."""
    from keras_bert.text.packer import BertPacker

    cache = _PACK_FUNCTIONS.setdefault(tokenizer, {})
    if (seq_length, segments) not in cache:
        packer = BertPacker(
            seq_length, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id
        )

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * segments)
        def pack(*texts):
            packed = packer([tokenizer(t) for t in texts])
            lengths = tf.reduce_sum(packed["input_mask"], axis=1)
            return {
                k: tf.RaggedTensor.from_tensor(packed[k], lengths=lengths).with_row_splits_dtype(
                    tf.int64
                )
                for k in ("input_word_ids", "input_type_ids")
            }

        cache[(seq_length, segments)] = pack
    return cache[(seq_length, segments)]
