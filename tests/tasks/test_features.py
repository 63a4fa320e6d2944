"""Batching of fine-tuning features: length bucketing, per-batch padding, fixed buckets under XLA,
deterministic plans for exact resume, replica splits; and text encoding in tf.data against the
original tokenizer's packing."""

import numpy as np
import tensorflow as tf
from finetune_cases import VOCAB, sentiment_rows, write_checkpoint, write_sst2

from keras_bert.tasks import features as feature_lib
from keras_bert.tasks import finetuning, prediction
from keras_bert.tasks.features import FeatureSet, batch_plan, make_dataset
from keras_bert.text.tokenizer import BertTokenizer


def _features(lengths, seed=0):
    rng = np.random.default_rng(seed)
    rows = [rng.integers(5, 40, size=n).astype(np.int32) for n in lengths]
    ids = tf.ragged.constant(rows, dtype=tf.int32, row_splits_dtype=tf.int64)
    types = tf.ragged.constant(
        [np.arange(n) % 2 for n in lengths], dtype=tf.int32, row_splits_dtype=tf.int64
    )
    return FeatureSet(
        {"input_word_ids": ids, "input_type_ids": types},
        {"label": np.arange(len(lengths), dtype=np.int32)},
    ), rows


def test_training_plan_covers_every_feature_once_and_groups_by_length():
    lengths = np.random.default_rng(0).integers(3, 120, size=1000)
    batches, padded = batch_plan(lengths, 32, shuffle=True, seed=3, epoch=0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    assert all(p == lengths[b].max() for b, p in zip(batches, padded))
    # Bucketing: padding is a small fraction of what padding every feature to the longest costs.
    padded_tokens = sum(len(b) * p for b, p in zip(batches, padded))
    assert padded_tokens < 1.1 * lengths.sum() < 0.6 * len(lengths) * lengths.max()
    # Deterministic per (seed, epoch); another epoch is another order.
    again, _ = batch_plan(lengths, 32, shuffle=True, seed=3, epoch=0)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))
    other, _ = batch_plan(lengths, 32, shuffle=True, seed=3, epoch=1)
    assert not all(np.array_equal(a, b) for a, b in zip(batches, other))
    dropped, _ = batch_plan(lengths, 32, shuffle=True, drop_remainder=True)
    assert len(dropped) == 1000 // 32 and {len(b) for b in dropped} == {32}


def test_eval_plan_is_sorted_and_fixed_buckets_round_up():
    lengths = np.array([5, 70, 12, 33, 8, 64, 60])
    batches, padded = batch_plan(lengths, 3)
    assert np.concatenate(batches).tolist() == np.argsort(lengths, kind="stable").tolist()
    _, bucketed = batch_plan(lengths, 3, buckets=[16, 64, 128])
    assert bucketed.tolist() == [16, 64, 128]
    assert (
        feature_lib.padded_length(200, [16, 64, 128]) == 128
    )  # Longer than every bucket: the largest.


def test_dataset_pads_each_batch_to_its_longest_feature():
    feats, rows = _features([7, 3, 12, 5, 9])
    batches, padded = batch_plan(feats.lengths, 2)
    for index, (x, y) in zip(batches, make_dataset(feats, batches, padded)):
        longest = max(len(rows[i]) for i in index)
        assert x["input_word_ids"].shape == (len(index), longest)
        for row, i in enumerate(index):
            n = len(rows[i])
            np.testing.assert_array_equal(x["input_word_ids"][row, :n], rows[i])
            np.testing.assert_array_equal(x["input_word_ids"][row, n:], 0)
            assert x["input_mask"][row].numpy().sum() == n
        np.testing.assert_array_equal(y["label"], index)


def test_replica_split_and_static_batch_padding():
    feats, rows = _features([7, 3, 12, 5, 9, 4, 6])
    batches, padded = batch_plan(feats.lengths, 4)
    elements = list(make_dataset(feats, batches, padded, num_replicas=2))
    assert len(elements) == 2 * len(batches)
    for k, index in enumerate(batches):
        first, second = elements[2 * k][0], elements[2 * k + 1][0]
        # Both replicas padded to the global batch's length (TPU replicas share one shape).
        assert first["input_word_ids"].shape[1] == second["input_word_ids"].shape[1] == padded[k]
        assert first["input_word_ids"].shape[0] + second["input_word_ids"].shape[0] == len(index)
    static = list(make_dataset(feats, batches, padded, pad_batch_to=4, label_keys=()))
    assert {tuple(x["input_word_ids"].shape)[0] for x, _ in static} == {4}
    last = static[-1][0]
    assert last["input_mask"].numpy()[len(batches[-1]) :].sum() == 0  # Padding rows are empty.


def test_multiple_choice_features_batch_to_b_k_s():
    ids = tf.ragged.constant(
        [[[2, 5, 3], [2, 6, 7, 3]], [[2, 3], [2, 8, 3]]], dtype=tf.int32, row_splits_dtype=tf.int64
    )
    feats = FeatureSet(
        {"input_word_ids": ids, "input_type_ids": ids * 0}, {"label": np.array([1, 0])}
    )
    assert feats.lengths.tolist() == [4, 3]
    batches, padded = batch_plan(feats.lengths, 2)
    ((x, y),) = make_dataset(feats, batches, padded, pad_batch_to=3)
    assert x["input_word_ids"].shape == (3, 2, 4)
    assert x["input_mask"].numpy().sum(axis=-1).tolist() == [[2, 3], [3, 4], [0, 0]]


def test_encode_texts_equals_the_original_packing():
    """Ids of [CLS] A [SEP] B [SEP] with longest-first truncation, as the original
    run_classifier."""
    import os
    import tempfile

    from official.nlp.tools import tokenization

    vocab_file = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    with open(vocab_file, "w") as f:
        f.write("".join(t + "\n" for t in VOCAB))
    reference = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    rows = sentiment_rows(40, seed=5)
    text_a, text_b = [s for s, _ in rows[:20]], [s.upper() for s, _ in rows[20:]]
    encoded = feature_lib.encode_texts(BertTokenizer(VOCAB), 24, text_a, text_b, batch_size=7)
    for i, (a, b) in enumerate(zip(text_a, text_b)):
        ta, tb = reference.tokenize(a), reference.tokenize(b)
        while len(ta) + len(tb) > 21:
            (ta if len(ta) > len(tb) else tb).pop()
        tokens = ["[CLS]"] + ta + ["[SEP]"] + tb + ["[SEP]"]
        assert encoded["input_word_ids"][i].numpy().tolist() == reference.convert_tokens_to_ids(
            tokens
        )
        assert encoded["input_type_ids"][i].numpy().tolist() == [0] * (len(ta) + 2) + [1] * (
            len(tb) + 1
        )


def test_under_xla_only_the_bucket_shapes_are_compiled(tmp_path):
    """Fixed buckets and a static batch size: the train and predict functions see at most one
    shape per bucket, over all epochs (each new shape would compile anew)."""
    data = write_sst2(str(tmp_path / "SST-2"), n_train=96, n_dev=40, n_test=4)
    ckpt = write_checkpoint(str(tmp_path / "ckpt"))
    seen = []
    make = feature_lib.make_dataset

    def recording(*args, **kwargs):
        return make(*args, **kwargs).map(lambda x, y: (_record(x), y))

    def _record(x):
        tf.py_function(lambda s: seen.append(tuple(s.numpy())), [tf.shape(x["input_word_ids"])], [])
        return x

    feature_lib.make_dataset = recording
    try:
        summary = finetuning.run_finetuning(
            task="sst2",
            data_dir=data,
            init_checkpoint=ckpt,
            model_dir=str(tmp_path / "r"),
            do_train=True,
            do_eval=True,
            jit_compile=True,
            seq_length=64,
            batch_size=16,
            eval_batch_size=16,
            num_train_epochs=2,
            learning_rate=1e-3,
            verbose=False,
            buckets="8,16,32",
            plot=False,
        )
    finally:
        feature_lib.make_dataset = make
    shapes = set(seen)
    assert summary["steps"] == 2 * (96 // 16)
    assert shapes <= {(16, b) for b in (8, 16, 32, 64)}, shapes
    assert 1 < len(shapes) <= 4
    # The XLA-compiled inference function was traced (and compiled) once per shape, over both
    # epochs' evaluations.
    (predict_fn,) = prediction._PREDICT_FUNCTIONS[summary["model"]].values()
    assert predict_fn.experimental_get_tracing_count() <= 4
