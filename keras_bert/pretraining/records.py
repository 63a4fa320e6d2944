"""Pre-training TFRecords (the original format) -> tf.data batches for `BertPretrainer.fit`.

Dimensions: B batch, S max_seq_length, P max_predictions_per_seq.

The records carry the original feature names (`create_pretraining_data.py`):
int64 `input_ids`, `input_mask`, `segment_ids` [S]; int64 `masked_lm_positions`,
`masked_lm_ids` [P]; float `masked_lm_weights` [P]; int64 `next_sentence_labels` [1].
Batches are `(inputs, labels)` dicts with the names the model uses, all ids int32:
inputs `input_word_ids`, `input_mask`, `input_type_ids` [B, S], `masked_lm_positions` [B, P];
labels `masked_lm_ids` [B, P], `masked_lm_weights` [B, P] float32, `next_sentence_labels` [B, 1].
File patterns go through `tf.io.gfile`, so `gs://` works where TensorFlow has GCS support.

Packed files (`create_pretraining_data(pack=True)`, several instances per row; the format is in
`keras_bert.pretraining.packing`) are read with `max_instances` I: inputs `input_word_ids`,
`input_type_ids`, `input_position_ids`, `input_instance_ids` [B, S], `masked_lm_positions`
[B, P], `cls_positions` [B, I]; labels add `next_sentence_weights` [B, I] float32 and
`next_sentence_labels` is [B, I]; `BertPretrainer(packed=True)` trains on them.
"""

import tensorflow as tf

# Original record feature name -> model input / label name.
INPUT_FEATURES = {
    "input_ids": "input_word_ids",
    "input_mask": "input_mask",
    "segment_ids": "input_type_ids",
    "masked_lm_positions": "masked_lm_positions",
}
LABEL_FEATURES = {
    "masked_lm_ids": "masked_lm_ids",
    "masked_lm_weights": "masked_lm_weights",
    "next_sentence_labels": "next_sentence_labels",
}
# The record features in their serialization order (`create_pretraining_data` writes them so).
FEATURE_NAMES = (*INPUT_FEATURES, *LABEL_FEATURES)
# Packed rows: record feature name -> model input / label name (`input_mask` is not an input).
PACKED_INPUT_FEATURES = {
    "input_ids": "input_word_ids",
    "segment_ids": "input_type_ids",
    "position_ids": "input_position_ids",
    "instance_ids": "input_instance_ids",
    "masked_lm_positions": "masked_lm_positions",
    "cls_positions": "cls_positions",
}
PACKED_LABEL_FEATURES = {**LABEL_FEATURES, "next_sentence_weights": "next_sentence_weights"}


def feature_spec(seq_length, max_predictions_per_seq, max_instances=None):
    """The `tf.io.parse_example` spec of one original pre-training record, or with
    `max_instances` of one packed record (`keras_bert.pretraining.packing`)."""
    ints = lambda n: tf.io.FixedLenFeature([n], tf.int64)  # noqa: E731
    spec = {
        "input_ids": ints(seq_length),
        "input_mask": ints(seq_length),
        "segment_ids": ints(seq_length),
        "masked_lm_positions": ints(max_predictions_per_seq),
        "masked_lm_ids": ints(max_predictions_per_seq),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": ints(1),
    }
    if max_instances is not None:
        spec.update(
            position_ids=ints(seq_length),
            instance_ids=ints(seq_length),
            cls_positions=ints(max_instances),
            next_sentence_labels=ints(max_instances),
            next_sentence_weights=tf.io.FixedLenFeature([max_instances], tf.float32),
        )
    return spec


def list_files(file_patterns):
    """Sorted, de-duplicated files matching one or more glob patterns.

    Args:
        file_patterns: str (comma-separated patterns allowed) or list of str; local paths
            or `gs://` URLs, with `*`/`?` wildcards (e.g. "data/train-*.tfrecord").

    Returns:
        list of str.

    Raises:
        FileNotFoundError: naming each pattern that matches no file.
    """
    if isinstance(file_patterns, str):
        file_patterns = file_patterns.split(",")
    patterns = [p.strip() for p in file_patterns if p and p.strip()]
    if not patterns:
        raise ValueError("No pre-training file pattern given.")
    files, missing = [], []
    for pattern in patterns:
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            missing.append(pattern)
        files.extend(matched)
    if missing:
        raise FileNotFoundError(f"No pre-training TFRecord files match {missing}.")
    return sorted(set(files))


def count_records(file_patterns):
    """Number of records in the files (reads them once; meant for held-out sets)."""
    return int(
        tf.data.TFRecordDataset(list_files(file_patterns)).reduce(0, lambda n, _: n + 1).numpy()
    )


def decode_record(serialized, seq_length, max_predictions_per_seq, max_instances=None):
    """Serialized records [B] -> (inputs, labels) dicts, int64 ids cast to int32 (packed
    records with `max_instances`)."""
    spec = feature_spec(seq_length, max_predictions_per_seq, max_instances)
    parsed = tf.io.parse_example(serialized, spec)
    parsed = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}
    packed = max_instances is not None
    input_features = PACKED_INPUT_FEATURES if packed else INPUT_FEATURES
    label_features = PACKED_LABEL_FEATURES if packed else LABEL_FEATURES
    inputs = {name: parsed[key] for key, name in input_features.items()}
    labels = {name: parsed[key] for key, name in label_features.items()}
    return inputs, labels


def check_records(files, seq_length, max_predictions_per_seq, max_instances=None):
    """Read the first record eagerly and fail early, naming the file, if it does not fit.

    Raises:
        ValueError: the first file is empty, unreadable or its features have other lengths.
    """
    first = files[0]
    try:
        records = list(tf.data.TFRecordDataset(first).take(1).as_numpy_iterator())
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        raise ValueError(f"{first} is not a readable TFRecord file: {e.message}") from e
    if not records:
        raise ValueError(f"{first} holds no records.")
    example = tf.train.Example.FromString(records[0])
    feature = example.features.feature
    for name, spec in feature_spec(seq_length, max_predictions_per_seq, max_instances).items():
        if name not in feature:
            raise ValueError(
                f"{first}: record has no feature {name!r} (features: {sorted(feature)})."
            )
        value = feature[name]
        length = (
            len(value.float_list.value) if spec.dtype == tf.float32 else len(value.int64_list.value)
        )
        if length != spec.shape[0]:
            raise ValueError(
                f"{first}: feature {name!r} has length {length}, expected {spec.shape[0]} "
                f"(seq_length={seq_length}, max_predictions_per_seq={max_predictions_per_seq}, "
                f"max_instances={max_instances})."
            )


def make_dataset(
    file_patterns,
    batch_size,
    seq_length,
    max_predictions_per_seq,
    *,
    is_training=True,
    input_context=None,
    seed=0,
    deterministic=True,
    shuffle_buffer=10000,
    drop_remainder=True,
    skip_batches=0,
    max_instances=None,
):
    """The pre-training input pipeline.

    Training data is shuffled (seeded) and repeated forever; evaluation data is read once
    in file order. With `input_context` (from `strategy.distribute_datasets_from_function`)
    each input pipeline reads its shard and batches the per-replica batch size.

    Args:
        file_patterns: str or list of str, see `list_files`.
        batch_size: int. GLOBAL batch size (split over replicas through `input_context`).
        seq_length: int. S, the records' `max_seq_length`.
        max_predictions_per_seq: int. P of the records.
        is_training: bool. Shuffle and repeat.
        input_context: optional `tf.distribute.InputContext`.
        seed: int. Seed of file and record shuffling.
        deterministic: bool. A reproducible example order (the same seed gives the same
            batches, also after `skip_batches`); with several input pipelines the records are
            sharded after shuffling, so the workers together see exactly the single-process
            batches. False reads files in parallel and shards by file (faster, not reproducible).
        shuffle_buffer: int. Records held by the shuffle buffer.
        drop_remainder: bool. Static batch shapes (needed on TPU; always True in training).
        skip_batches: int. Batches of this pipeline to skip (the data position when resuming).
        max_instances: optional int I: read packed records (see the module docstring).

    Returns:
        `tf.data.Dataset` of (inputs, labels), see the module docstring.
    """
    files = list_files(file_patterns)
    check_records(files, seq_length, max_predictions_per_seq, max_instances)
    num_pipelines, index, batch_size = _pipeline_share(input_context, batch_size)
    shard_files = num_pipelines > 1 and not deterministic and len(files) >= num_pipelines
    if shard_files:
        files = files[index::num_pipelines]
    if is_training:
        ds = _shuffled_records(files, seed, deterministic, shuffle_buffer)
    else:
        ds = tf.data.TFRecordDataset(files)
    if num_pipelines > 1 and not shard_files:
        ds = ds.shard(num_pipelines, index)
    ds = ds.with_options(_options(deterministic))
    ds = ds.batch(batch_size, drop_remainder=drop_remainder or is_training)
    if skip_batches:
        ds = ds.skip(skip_batches)
    ds = ds.map(
        lambda r: decode_record(r, seq_length, max_predictions_per_seq, max_instances),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return ds.prefetch(tf.data.AUTOTUNE)


def _pipeline_share(input_context, batch_size):
    """(number of input pipelines, this one's index, its batch size); raises if it is empty."""
    num_pipelines, index = 1, 0
    if input_context is not None:
        num_pipelines, index = input_context.num_input_pipelines, input_context.input_pipeline_id
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    return num_pipelines, index, batch_size


def _shuffled_records(files, seed, deterministic, shuffle_buffer):
    """The records of `files`, repeated forever, in a seeded shuffled order."""
    # Every epoch of the files in a new order, drawn statelessly from (seed, epoch):
    # each iterator of this dataset yields the same stream (Keras may iterate twice).
    names = tf.constant(files)
    ds = tf.data.Dataset.range(2**62).flat_map(
        lambda epoch: tf.data.Dataset.from_tensor_slices(
            tf.random.experimental.stateless_shuffle(
                names, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
            )
        )
    )
    ds = ds.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(8, len(files)),
        block_length=1,
        num_parallel_calls=None if deterministic else tf.data.AUTOTUNE,
    )
    return ds.shuffle(shuffle_buffer, seed=seed + 1, reshuffle_each_iteration=False)


def _options(deterministic):
    """Dataset options: the order's determinism, and no auto-sharding by tf.distribute."""
    options = tf.data.Options()
    options.experimental_deterministic = deterministic
    # The sharding is done here; tf.distribute must not shard again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return options
