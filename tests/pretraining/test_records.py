"""Reading original-format pre-training TFRecords: names, dtypes, values, sharding, order,
resume position, and clear errors for missing or malformed files."""

import numpy as np
import pytest
import tensorflow as tf
from pretraining_data import serialize, write_records

from keras_bert.pretraining import records

S, P = 24, 4


def _rows(batches, key, part=0):
    return np.concatenate([b[part][key].numpy() for b in batches])


def test_eval_batches_equal_the_written_records(tmp_path):
    pattern, examples = write_records(str(tmp_path), 10, seq_length=S, max_predictions_per_seq=P)
    batches = list(records.make_dataset(pattern, 4, S, P, is_training=False, drop_remainder=False))
    assert [b[0]["input_word_ids"].shape[0] for b in batches] == [4, 4, 2]
    inputs, labels = batches[0]
    assert sorted(inputs) == [
        "input_mask",
        "input_type_ids",
        "input_word_ids",
        "masked_lm_positions",
    ]
    assert sorted(labels) == ["masked_lm_ids", "masked_lm_weights", "next_sentence_labels"]
    for spec in (inputs, labels):
        for name, tensor in spec.items():
            assert tensor.dtype == (tf.float32 if name == "masked_lm_weights" else tf.int32), name
    assert labels["next_sentence_labels"].shape == (4, 1)
    for name, key in [*records.INPUT_FEATURES.items()]:
        np.testing.assert_array_equal(_rows(batches, key, 0), np.stack([e[name] for e in examples]))
    for name, key in records.LABEL_FEATURES.items():
        np.testing.assert_array_equal(_rows(batches, key, 1), np.stack([e[name] for e in examples]))
    dropped = list(records.make_dataset(pattern, 4, S, P, is_training=False, drop_remainder=True))
    assert len(dropped) == 2
    assert records.count_records(pattern) == 10


def test_training_order_is_seeded_and_resumable(tmp_path):
    pattern, examples = write_records(
        str(tmp_path), 40, seq_length=S, max_predictions_per_seq=P, num_shards=3
    )
    take = lambda ds, n: list(ds.take(n))  # noqa: E731
    a = take(records.make_dataset(pattern, 8, S, P, seed=5, shuffle_buffer=16), 12)
    b = take(records.make_dataset(pattern, 8, S, P, seed=5, shuffle_buffer=16), 12)
    c = take(records.make_dataset(pattern, 8, S, P, seed=6, shuffle_buffer=16), 12)
    ids = lambda bs: _rows(bs, "input_word_ids")  # noqa: E731
    np.testing.assert_array_equal(ids(a), ids(b))
    assert not np.array_equal(ids(a), ids(c))
    # The same dataset object iterated twice gives the same stream (Keras may do so).
    ds = records.make_dataset(pattern, 8, S, P, seed=5, shuffle_buffer=16)
    np.testing.assert_array_equal(ids(take(ds, 3)), ids(take(ds, 3)))
    # skip_batches resumes the stream exactly where it was.
    resumed = take(
        records.make_dataset(pattern, 8, S, P, seed=5, shuffle_buffer=16, skip_batches=7), 5
    )
    np.testing.assert_array_equal(ids(resumed), ids(a[7:]))
    # Without record shuffling, each epoch (of 40 records) holds every record exactly once.
    epochs = ids(take(records.make_dataset(pattern, 8, S, P, seed=5, shuffle_buffer=1), 10))
    written = sorted(tuple(e["input_ids"]) for e in examples)
    assert sorted(map(tuple, epochs[:40])) == written and sorted(map(tuple, epochs[40:])) == written
    assert not np.array_equal(epochs[:40], epochs[40:])  # Files come in a new order each epoch.


def test_input_context_shards_reproduce_the_global_batch(tmp_path):
    pattern, _ = write_records(
        str(tmp_path), 48, seq_length=S, max_predictions_per_seq=P, num_shards=2
    )
    full = list(records.make_dataset(pattern, 8, S, P, seed=1, shuffle_buffer=20).take(4))
    parts = []
    for index in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=index, num_replicas_in_sync=2
        )
        parts.append(
            list(
                records.make_dataset(
                    pattern, 8, S, P, seed=1, shuffle_buffer=20, input_context=context
                ).take(4)
            )
        )
    for step in range(4):
        assert parts[0][step][0]["input_word_ids"].shape[0] == 4  # Per-replica batch.
        union = np.concatenate([parts[i][step][0]["input_word_ids"].numpy() for i in range(2)])
        np.testing.assert_array_equal(
            np.sort(union, axis=0), np.sort(full[step][0]["input_word_ids"].numpy(), axis=0)
        )


def test_file_patterns(tmp_path):
    write_records(str(tmp_path), 4, seq_length=S, max_predictions_per_seq=P, prefix="a")
    write_records(str(tmp_path), 4, seq_length=S, max_predictions_per_seq=P, prefix="b")
    files = records.list_files(f"{tmp_path}/a-*.tfrecord, {tmp_path}/b-*")
    assert [f.rsplit("/", 1)[1] for f in files] == ["a-00000.tfrecord", "b-00000.tfrecord"]
    assert records.list_files([f"{tmp_path}/*", f"{tmp_path}/a-*"]) == files
    with pytest.raises(FileNotFoundError, match="nothing-\\*"):
        records.list_files(f"{tmp_path}/a-*,{tmp_path}/nothing-*")
    with pytest.raises(ValueError, match="No pre-training file pattern"):
        records.list_files(" , ")


def test_bad_records_are_reported(tmp_path):
    pattern, _ = write_records(str(tmp_path), 4, seq_length=S, max_predictions_per_seq=P)
    with pytest.raises(ValueError, match="'input_ids' has length 24, expected 32"):
        records.make_dataset(pattern, 2, 32, P)
    with pytest.raises(ValueError, match="'masked_lm_positions' has length 4, expected 5"):
        records.make_dataset(pattern, 2, S, 5)
    missing = {
        k: v
        for k, v in write_records(str(tmp_path), 1, prefix="m")[1][0].items()
        if k != "next_sentence_labels"
    }
    with tf.io.TFRecordWriter(str(tmp_path / "nolabel.tfrecord")) as w:
        w.write(serialize(missing))
    with pytest.raises(ValueError, match="no feature 'next_sentence_labels'"):
        records.make_dataset(str(tmp_path / "nolabel.tfrecord"), 2, 32, 5)
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(ValueError, match="holds no records"):
        records.make_dataset(str(tmp_path / "empty.tfrecord"), 2, S, P)
    (tmp_path / "junk.tfrecord").write_bytes(b"this is not a tfrecord file at all" * 3)
    with pytest.raises(ValueError, match="not a readable TFRecord"):
        records.make_dataset(str(tmp_path / "junk.tfrecord"), 2, S, P)


def test_non_deterministic_mode_shards_files_per_worker(tmp_path):
    pattern, examples = write_records(
        str(tmp_path), 20, seq_length=S, max_predictions_per_seq=P, num_shards=2
    )
    seen = []
    for index in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=index, num_replicas_in_sync=2
        )
        ds = records.make_dataset(
            pattern, 4, S, P, input_context=context, deterministic=False, shuffle_buffer=1
        )
        seen.append({tuple(r) for r in _rows(list(ds.take(10)), "input_word_ids")})
    # Each worker reads its own file: examples[0::2] went to shard 0, examples[1::2] to shard 1.
    assert seen[0] == {tuple(e["input_ids"]) for e in examples[0::2]}
    assert seen[1] == {tuple(e["input_ids"]) for e in examples[1::2]}
