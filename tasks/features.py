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
from absl import logging

from keras_bert.text import task_data

# Labels of padded positions and of ignored tokens (NER: pieces after a word's first).
IGNORE_LABEL = -100
# Features sorted by length together, in multiples of the batch size (training).
SORT_WINDOW_BATCHES = 50
# Fixed padded lengths for XLA, TPU and JAX, capped by the run's seq_length.
DEFAULT_BUCKETS = task_data.DEFAULT_BUCKETS
# A batch's padded length: the rule of `fit`'s batches too (`task_data.bucket_sizes`).
padded_length = task_data.padded_length


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
    targets=None,
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
        targets: callable or None: a batch's labels dict -> the tuple that follows the inputs
            (`Task.targets`: the task model's y, and sample weights); None: (labels,).

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
        return (x, *targets(y)) if targets else (x, y)

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


def encode_texts(tokenizer, seq_length, text_a, text_b=None, batch_size=512, return_cut=False):
    """Tokenizes and packs texts in `tf.data` ([CLS] A [SEP] (B [SEP]), the original's
    longest-first truncation to `seq_length`), without padding.

    Args:
        tokenizer: `keras_bert.text.BertTokenizer`.
        seq_length: int, the longest packed sequence.
        text_a: list of str. text_b: list of str, or None for single texts.
        batch_size: int, texts tokenized per `tf.data` batch.
        return_cut: bool. Also return which examples were truncated.

    Returns:
        dict with int32 `tf.RaggedTensor`s [N, (L)] `input_word_ids` and `input_type_ids`;
        with `return_cut`, (that dict, bool `np.ndarray` [N]: tokens were cut).
    """
    columns = (list(text_a),) if text_b is None else (list(text_a), list(text_b))
    if not columns[0]:
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
        inputs = {"input_word_ids": empty, "input_type_ids": empty}
        return (inputs, np.zeros([0], bool)) if return_cut else inputs
    pack = _pack_function(tokenizer, seq_length, len(columns))
    data = (
        tf.data.Dataset.from_tensor_slices(columns)
        .batch(batch_size)
        .map(pack, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    )
    parts = list(data)
    inputs = {
        k: tf.concat([p[k] for p in parts], axis=0) for k in ("input_word_ids", "input_type_ids")
    }
    if return_cut:
        return inputs, np.concatenate([p["cut"].numpy() for p in parts])
    return inputs


def encode_long_texts(tokenizer, seq_length, text_a, text_b, options, name):
    """Texts -> (inputs, example_index) as `options` (`long_text.LongTextOptions`) say:
    truncated (`encode_texts`; the log says how many were cut) or in windows
    (`encode_windows`; the log says how many texts had more windows than max_windows).

    Args:
        tokenizer, seq_length, text_a, text_b: as `encode_texts`.
        options: `keras_bert.tasks.long_text.LongTextOptions`.
        name: str, what the log lines name (task and split).

    Returns:
        (inputs, example_index): dict of ragged `input_word_ids`, `input_type_ids` [N, (L)], and
        int `np.ndarray` [N], the example of each feature.
    """
    from keras_bert.text.window_sizes import resolve_stride

    n = len(text_a)
    if options.long_text == "truncate":
        inputs, cut = encode_texts(tokenizer, seq_length, text_a, text_b, return_cut=True)
        if cut.any():
            logging.info(
                "%s: %d of %d examples are longer than seq_length %d and were truncated "
                "(long_text=windows reads them whole).",
                name,
                int(cut.sum()),
                n,
                seq_length,
            )
        return inputs, np.arange(n)
    stride = resolve_stride(seq_length, text_b is not None, options.doc_stride)
    inputs, example_index, needed = encode_windows(
        tokenizer,
        seq_length,
        text_a,
        text_b,
        doc_stride=stride,
        max_windows=options.max_windows,
    )
    logging.info(
        "%s: %d examples -> %d windows (doc_stride %d); %d examples need more than max_windows "
        "%d and are read in part.",
        name,
        n,
        len(example_index),
        stride,
        int((needed > options.max_windows).sum()),
        options.max_windows,
    )
    return inputs, example_index


def encode_windows(
    tokenizer, seq_length, text_a, text_b=None, *, doc_stride, max_windows, batch_size=256
):
    """Long texts -> one feature per window (`keras_bert.text.windows.pack_windows`, the
    graph the exports run): single texts in windows of `seq_length - 2` tokens; pairs keep
    text_a whole up to `window_sizes.max_first_length(seq_length)` tokens beside windows of
    text_b.

    Args:
        tokenizer: `keras_bert.text.BertTokenizer`.
        seq_length: int, the longest packed window.
        text_a: list of str. text_b: list of str, or None for single texts.
        doc_stride: int, tokens between window starts (`window_sizes.resolve_stride`).
        max_windows: int, windows kept per text (its first).
        batch_size: int, texts windowed per call.

    Returns:
        (inputs, example_index, needed): dict of int32 `tf.RaggedTensor`s [W, (L)]
        `input_word_ids` and `input_type_ids`; int `np.ndarray` [W], the text of each window;
        int `np.ndarray` [N], the windows each text would need without `max_windows`.
    """
    window = _window_function(tokenizer, seq_length, doc_stride, max_windows, text_b is not None)
    texts = [list(text_a)] + ([] if text_b is None else [list(text_b)])
    ids, types, example_index, needed = [], [], [], []
    for begin in range(0, len(texts[0]), batch_size):
        out = window(*[tf.constant(t[begin : begin + batch_size], tf.string) for t in texts])
        ids.append(out["input_word_ids"])
        types.append(out["input_type_ids"])
        example_index.append(out["example"].numpy() + begin)
        needed.append(out["needed"].numpy())
    if not ids:
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
        return (
            {"input_word_ids": empty, "input_type_ids": empty},
            np.zeros([0], np.int64),
            (np.zeros([0], np.int64)),
        )
    inputs = {"input_word_ids": tf.concat(ids, 0), "input_type_ids": tf.concat(types, 0)}
    return inputs, np.concatenate(example_index).astype(np.int64), np.concatenate(needed)


def pool_windows(logits, example_index, num_examples, pooling="mean"):
    """Each example's logits from its features' (`keras_bert.text.windows.pool_windows`, as
    the exports pool them): their "mean", "max" (per class) or "first". Logits of a
    document-level model (one row per example already) come back as they are.

    Args:
        logits: float `np.ndarray` [W, C], one row per feature, an example's features
            consecutive (as `encode_windows` makes them); or [N, C], one per example.
        example_index: int `np.ndarray` [W], the example of each feature (every example has one).
        num_examples: int, N.
        pooling: "mean", "max" or "first".

    Returns:
        float `np.ndarray` [N, C].
    """
    from keras_bert.text.windows import pool_windows as pool

    if len(logits) == num_examples:  # Every example has a window: one each, or pooled.
        return np.asarray(logits)
    example_index = np.asarray(example_index)
    count = np.bincount(example_index, minlength=num_examples)
    return pool(
        tf.constant(logits, tf.float32),
        tf.constant(example_index, tf.int32),
        tf.constant(count, tf.int32),
        pooling,
    ).numpy()


_WINDOW_FUNCTIONS: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def _window_function(tokenizer, seq_length, doc_stride, max_windows, pair):
    """A `tf.function` windowing a batch of texts (`pack_windows`), traced once per tokenizer
    and settings; it returns ragged windows, their `example` and each text's `needed`."""
    from keras_bert.text.window_sizes import max_first_length
    from keras_bert.text.windows import pack_windows

    cache = _WINDOW_FUNCTIONS.setdefault(tokenizer, {})
    key = (seq_length, doc_stride, max_windows, pair)
    if key not in cache:

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * (1 + pair))
        def window(*texts):
            first, second = (None, texts[0]) if len(texts) == 1 else texts
            inputs, windows, _ = pack_windows(
                tokenizer,
                first,
                second,
                seq_length,
                doc_stride,
                max_first_length(seq_length),
                max_windows,
            )
            lengths = tf.reduce_sum(inputs["input_mask"], axis=1)
            out = {
                k: tf.RaggedTensor.from_tensor(inputs[k], lengths=lengths).with_row_splits_dtype(
                    tf.int64
                )
                for k in ("input_word_ids", "input_type_ids")
            }
            return dict(out, example=windows["example"], needed=windows["needed"])

        cache[key] = window
    return cache[key]


_PACK_FUNCTIONS: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = (
    weakref.WeakKeyDictionary()
)  # tokenizer -> {(seq_length, segments): tf.function}


def _pack_function(tokenizer, seq_length, segments):
    """A `tf.function` tokenizing and packing a batch of texts, traced once per tokenizer and
    shape: every `tf.data` pipeline of `encode_texts` then calls the same graph. It also says
    which rows were truncated (`cut`)."""
    from keras_bert.text.packer import BertPacker

    cache = _PACK_FUNCTIONS.setdefault(tokenizer, {})
    if (seq_length, segments) not in cache:
        packer = BertPacker(
            seq_length, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id
        )

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * segments)
        def pack(*texts):
            tokens = [tokenizer(t) for t in texts]
            packed = packer(tokens)
            lengths = tf.reduce_sum(packed["input_mask"], axis=1)
            wanted = tf.add_n([t.row_lengths() for t in tokens]) + 1 + segments
            out = {
                k: tf.RaggedTensor.from_tensor(packed[k], lengths=lengths).with_row_splits_dtype(
                    tf.int64
                )
                for k in ("input_word_ids", "input_type_ids")
            }
            return dict(out, cut=wanted > tf.cast(lengths, wanted.dtype))

        cache[(seq_length, segments)] = pack
    return cache[(seq_length, segments)]
