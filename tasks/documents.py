"""Batches of whole documents for document-level training on windows
(`keras_bert.tasks.long_text`, window_training="document"; the model is
`keras_bert.models.documents.DocumentClassifier`).

A document is the run of consecutive window features of one example (`FeatureSet.example_index`,
as `features.encode_windows` makes them). `document_plan` packs documents into batches of at
most a budget of windows per replica (the run's `batch_size` split over the replicas): sorted by
window count (bucketing: documents of similar size together), the documents of one count in a
random order each epoch, the batches shuffled. Packing depends only on the sorted counts, so
every epoch has the same number of batches (a resumed run skips exactly the ones it trained on).
`make_document_dataset` turns a plan into `tf.data`: each element the windows of its documents
(encoder inputs [W, S]), their `window_index` [B, K] and the documents' labels [B].

Dimensions: N documents (examples), F window features, W windows of a batch, B documents of a
batch, K windows of its longest document, S padded length, R replicas.
"""

import numpy as np
import tensorflow as tf

from keras_bert.models.documents import WINDOW_INDEX
from keras_bert.tasks.features import _append_empty, _to_dense, padded_length

WEIGHT = "weight"  # The label of fixed-shape batches: 1 per document, 0 per padding one.


def window_counts(features):
    """int `np.ndarray` [N]: windows of each document of a `FeatureSet`."""
    index = np.asarray(features.example_index)
    return np.bincount(index, minlength=int(index.max()) + 1 if len(index) else 0)


def check_budget(counts, budget, name="batch_size"):
    """Raises naming `name` when a document has more windows than a batch may hold."""
    if len(counts) and int(np.max(counts)) > budget:
        raise ValueError(
            f"A document has {int(np.max(counts))} windows, more than the {budget} windows a "
            f"batch holds per replica ({name}): raise {name} or lower max_windows."
        )


def document_plan(counts, budget, *, shuffle=False, seed=0, epoch=0, num_replicas=1):
    """Packs documents into batches of at most `budget` windows per replica.

    Args:
        counts: int array [N], windows per document (each <= budget).
        budget: int, windows per replica's batch.
        shuffle: bool. Training order (see the module docstring); else sorted by count.
        seed, epoch: ints seeding the training order.
        num_replicas: int, R: a global batch is R consecutive packs, one per replica (the last
            one filled up with empty packs).

    Returns:
        list of global batches, each a list of R int arrays of document indices.
    """
    counts = np.asarray(counts, dtype=np.int64)
    check_budget(counts, budget)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(counts)) if shuffle else np.arange(len(counts))
    order = order[np.argsort(counts[order], kind="stable")]  # Equal counts: random order.
    packs, current, used = [], [], 0
    for doc in order:
        if current and used + counts[doc] > budget:
            packs.append(np.array(current, np.int64))
            current, used = [], 0
        current.append(doc)
        used += counts[doc]
    if current:
        packs.append(np.array(current, np.int64))
    packs += [np.zeros([0], np.int64)] * (-len(packs) % num_replicas)
    batches = [packs[i : i + num_replicas] for i in range(0, len(packs), num_replicas)]
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def make_document_dataset(
    features,
    batches,
    *,
    replica_range=None,
    fixed=None,
    buckets=None,
    label_keys=("label",),
    targets=None,
):
    """A `tf.data.Dataset` of a `document_plan`: (inputs, labels) per replica pack.

    Args:
        features: `FeatureSet` of window features (an example's windows consecutive).
        batches: `document_plan`'s global batches.
        replica_range: (first, last) replicas fed by this input pipeline (default all).
        fixed: (windows, max_windows) or None. Pad every pack to this many windows and
            documents, and `window_index` to max_windows columns (XLA, TPU: static shapes);
            labels then carry `weight` (0 for padding documents).
        buckets: optional fixed padded lengths (`features.padded_length`).
        label_keys: label names to include, one per document (its first window's).
        targets: callable or None, as `features.make_dataset`'s.

    Returns:
        `tf.data.Dataset` of (inputs, labels): `input_word_ids`, `input_mask`, `input_type_ids`
        int32 [W, S], `window_index` int32 [B, K]; labels [B].
    """
    counts = window_counts(features)
    first_window = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    lengths = features.lengths
    n = features.num_features  # The index of the empty feature `_append_empty` adds.
    first, last = replica_range or (0, len(batches[0]) if batches else 1)
    rows, indexes, shapes, docs, padded = [], [], [], [], []
    for batch in batches:
        docs_of_batch = np.concatenate(batch)
        windows = [np.arange(first_window[d], first_window[d] + counts[d]) for d in docs_of_batch]
        longest = max((int(lengths[w].max()) for w in windows), default=2)
        for pack in batch[first:last]:
            window_rows, index = _pack_windows(pack, counts, first_window, n, fixed)
            rows.append(window_rows)
            indexes.append(index.reshape(-1))
            shapes.append(index.shape)
            docs.append(_pad(first_window[pack], fixed[0] if fixed else len(pack), n))
            padded.append(padded_length(longest, buckets))
    inputs = {k: _append_empty(v) for k, v in features.inputs.items()}
    labels = {k: _append_empty(features.labels[k]) for k in label_keys}
    data = tf.data.Dataset.from_tensor_slices(
        (_ragged(rows), _ragged(indexes), np.array(shapes, np.int64).reshape(-1, 2),
         _ragged(docs), np.array(padded, np.int64))
    )  # fmt: skip

    def gather(window_rows, index, shape, doc_rows, length):
        x = {}
        for name, value in inputs.items():
            x[name] = _to_dense(tf.gather(value, window_rows), length, 0)  # (W, S)
            if name == "input_word_ids":
                x["input_mask"] = _to_dense(tf.ones_like(tf.gather(value, window_rows)), length, 0)
        x[WINDOW_INDEX] = tf.cast(tf.reshape(index, shape), tf.int32)  # (B, K)
        y = {name: tf.gather(value, doc_rows) for name, value in labels.items()}  # (B,)
        if fixed:
            y[WEIGHT] = tf.cast(doc_rows < n, tf.float32)
        return (x, *targets(y)) if targets else (x, y)

    return data.map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(
        tf.data.AUTOTUNE
    )


def concatenate_packs(packs, first, count, budget):
    """Replica packs of `make_document_dataset(fixed=(budget, ...))` side by side: each global
    batch's `count` packs concatenated along the first axis, as `keras.distribution` splits a
    batch over its devices (pack r of the batch to device r), `window_index` pointing into the
    concatenated windows (pack r's indexes offset by (first + r) * budget).

    Args:
        packs: the `tf.data.Dataset` of packs, `count` per global batch, in replica order.
        first: int, the global replica index of each batch's first pack (several hosts: this
            host's first).
        count: int, packs per batch in `packs`.
        budget: int, windows and documents of every pack.

    Returns:
        `tf.data.Dataset` of (inputs, labels): windows [count * budget, S], `window_index`
        [count * budget, K], labels [count * budget].
    """
    offsets = (tf.range(first, first + count) * budget)[:, None, None]  # (R, 1, 1)

    def concatenate(x, y):
        x = dict(x)
        index = x.pop(WINDOW_INDEX)  # (R, budget, K), -1 where a document has no window
        x = {k: tf.reshape(v, [-1, tf.shape(v)[-1]]) for k, v in x.items()}  # (R W, S)
        index = tf.where(index >= 0, index + tf.cast(offsets, index.dtype), index)
        x[WINDOW_INDEX] = tf.reshape(index, [-1, tf.shape(index)[-1]])  # (R B, K)
        return x, {k: tf.reshape(v, [-1]) for k, v in y.items()}  # (R B,)

    return packs.batch(count, drop_remainder=True).map(concatenate)


def _pack_windows(pack, counts, first_window, n, fixed):
    """(window rows [W], window_index [B, K]) of one pack of documents; padded to `fixed`
    (windows, max_windows) with the empty feature `n` and -1."""
    width = fixed[1] if fixed else int(max((counts[d] for d in pack), default=1))
    documents = fixed[0] if fixed else len(pack)
    index = np.full([documents, width], -1, np.int64)
    window_rows, used = [], 0
    for row, doc in enumerate(pack):
        index[row, : counts[doc]] = np.arange(used, used + counts[doc])
        window_rows.append(np.arange(first_window[doc], first_window[doc] + counts[doc]))
        used += counts[doc]
    window_rows = np.concatenate(window_rows) if window_rows else np.zeros([0], np.int64)
    return _pad(window_rows, fixed[0] if fixed else len(window_rows), n), index


def _pad(rows, size, n):
    """`rows` padded to `size` with the empty feature `n`."""
    return np.concatenate([rows, np.full(size - len(rows), n, np.int64)]).astype(np.int64)


def _ragged(arrays):
    """int64 `tf.RaggedTensor` [len(arrays), (L)]."""
    return tf.RaggedTensor.from_row_lengths(
        np.concatenate(arrays).astype(np.int64) if arrays else np.zeros([0], np.int64),
        np.array([len(a) for a in arrays], np.int64),
    )


def predict_documents(call, features, budget, buckets=None, fixed=False, max_windows=None):
    """The document logits of a `DocumentClassifier` on every document, in document order.

    Args:
        call: function inputs -> model outputs (the runner's inference function).
        features: `FeatureSet` of window features.
        budget: int, windows per batch.
        buckets: optional fixed padded lengths. fixed: bool, pad every batch to `budget`
            windows and documents and `max_windows` columns (XLA, TPU).
        max_windows: int, the column count of fixed batches.

    Returns:
        {"logits": float `np.ndarray` [N, C]}.
    """
    counts = window_counts(features)
    batches = document_plan(counts, budget)
    data = make_document_dataset(
        features,
        batches,
        fixed=(budget, max_windows) if fixed else None,
        buckets=buckets,
        label_keys=(),
    )
    logits = [None] * len(counts)
    for [pack], (x, _) in zip(batches, data, strict=True):  # To its end: see `prediction`.
        out = np.asarray(call(x)["logits"])[: len(pack)]
        for row, doc in enumerate(pack):
            logits[doc] = out[row]
    return {"logits": np.stack(logits) if logits else np.zeros([0, 1], np.float32)}
