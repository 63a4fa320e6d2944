"""BertPacker against a plain Python transcription of the original run_classifier packing."""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.text.packer import BertPacker, longest_first_lengths

CLS, SEP, PAD = 101, 102, 0


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
    """google-research/bert run_classifier.py, verbatim logic."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _reference(a, b, seq_length):
    """One example as in run_classifier.convert_single_example (ids instead of tokens)."""
    a, b = list(a), None if b is None else list(b)
    if seq_length is not None:
        if b:
            _truncate_seq_pair(a, b, seq_length - 3)
        else:
            a = a[: seq_length - 2]
    ids = [CLS] + a + [SEP]
    types = [0] * len(ids)
    if b:
        ids += b + [SEP]
        types += [1] * (len(b) + 1)
    return ids, types


def _reference_batch(rows_a, rows_b, seq_length):
    packed = [
        _reference(a, None if rows_b is None else rows_b[i], seq_length)
        for i, a in enumerate(rows_a)
    ]
    width = seq_length or max(len(ids) for ids, _ in packed)
    pad = lambda xs, v: xs + [v] * (width - len(xs))  # noqa: E731
    return {
        "input_word_ids": np.array([pad(ids, PAD) for ids, _ in packed]),
        "input_mask": np.array([pad([1] * len(ids), 0) for ids, _ in packed]),
        "input_type_ids": np.array([pad(types, 0) for _, types in packed]),
    }


def _random_rows(rng, n, max_len):
    return [[rng.randrange(1000, 2000) for _ in range(rng.randint(0, max_len))] for _ in range(n)]


def _assert_packed(out, expected):
    for key, value in expected.items():
        assert out[key].dtype == tf.int32
        np.testing.assert_array_equal(out[key].numpy(), value, err_msg=key)


@pytest.mark.parametrize("seq_length", [3, 4, 5, 8, 13, 32, None])
def test_pairs_match_reference(seq_length):
    rng = random.Random(seq_length or 0)
    packer = BertPacker(seq_length, cls_id=CLS, sep_id=SEP, pad_id=PAD)
    fn = tf.function(packer)
    for max_len in (0, 3, 10, 30):
        rows_a, rows_b = _random_rows(rng, 64, max_len), _random_rows(rng, 64, max_len)
        out = fn(
            (
                tf.ragged.constant(rows_a, tf.int32, ragged_rank=1, inner_shape=()),
                tf.ragged.constant(rows_b, tf.int32, ragged_rank=1, inner_shape=()),
            )
        )
        _assert_packed(out, _reference_batch(rows_a, rows_b, seq_length))


@pytest.mark.parametrize("seq_length", [2, 3, 9, None])
def test_single_segment_matches_reference(seq_length):
    rng = random.Random(7)
    packer = BertPacker(seq_length, cls_id=CLS, sep_id=SEP, pad_id=PAD)
    for max_len in (0, 5, 20):
        rows = _random_rows(rng, 32, max_len)
        out = packer(tf.ragged.constant(rows, tf.int64, ragged_rank=1, inner_shape=()))
        _assert_packed(out, _reference_batch(rows, None, seq_length))


def test_longest_first_closed_form_exhaustive():
    pairs = [(a, b) for a in range(25) for b in range(25)]
    len_a, len_b = (tf.constant([p[i] for p in pairs], tf.int32) for i in range(2))
    for budget in range(30):
        kept_a, kept_b = longest_first_lengths(len_a, len_b, budget)
        for (a, b), ka, kb in zip(pairs, kept_a.numpy(), kept_b.numpy()):
            tokens_a, tokens_b = list(range(a)), list(range(b))
            _truncate_seq_pair(tokens_a, tokens_b, budget)
            assert (ka, kb) == (len(tokens_a), len(tokens_b)), (a, b, budget)


def test_waterfall_keeps_first_segment():
    packer = BertPacker(8, cls_id=CLS, sep_id=SEP, truncation="waterfall")
    out = packer(
        (
            tf.ragged.constant([[1, 2, 3, 4], [1, 2, 3, 4, 5, 6, 7]]),
            tf.ragged.constant([[9, 9, 9], [9]]),
        )
    )
    assert out["input_word_ids"].numpy().tolist() == [
        [CLS, 1, 2, 3, 4, SEP, 9, SEP],
        [CLS, 1, 2, 3, 4, 5, SEP, 0],
    ]


def test_word_level_ragged_and_dense_inputs():
    packer = BertPacker(6, cls_id=CLS, sep_id=SEP)
    words = tf.ragged.constant([[[5, 6], [7]], [[8]]])  # (B, (words), (pieces))
    assert packer(words)["input_word_ids"].numpy().tolist() == [
        [CLS, 5, 6, 7, SEP, 0],
        [CLS, 8, SEP, 0, 0, 0],
    ]
    dense = packer(tf.constant([[5, 6, 7, 8, 9]]))
    assert dense["input_word_ids"].numpy().tolist() == [[CLS, 5, 6, 7, 8, SEP]]


def test_empty_batch():
    empty = tf.ragged.constant([], tf.int32, ragged_rank=1, inner_shape=())
    for seq_length, width in ((8, 8), (None, 0)):
        out = BertPacker(seq_length, cls_id=CLS, sep_id=SEP)((empty, empty))
        assert all(v.shape == (0, width) for v in out.values())


def test_in_tf_data_batched_and_unbatched():
    rng = random.Random(3)
    rows_a, rows_b = _random_rows(rng, 20, 12), _random_rows(rng, 20, 12)
    expected = _reference_batch(rows_a, rows_b, 16)
    packer = BertPacker(16, cls_id=CLS, sep_id=SEP)
    ragged = (
        tf.ragged.constant(rows_a, ragged_rank=1, inner_shape=()),
        tf.ragged.constant(rows_b, ragged_rank=1, inner_shape=()),
    )
    batched = tf.data.Dataset.from_tensor_slices(ragged).batch(8).map(lambda a, b: packer((a, b)))
    got = {k: np.concatenate([x[k].numpy() for x in batched]) for k in expected}
    _assert_packed({k: tf.constant(v) for k, v in got.items()}, expected)
    single = tf.data.Dataset.from_tensor_slices(ragged).map(lambda a, b: packer((a, b))).batch(20)
    _assert_packed(next(iter(single)), expected)


def test_dynamic_length_in_functional_model_and_save(tmp_path):
    inputs = (
        keras.Input(shape=(None,), dtype="int32", ragged=True),
        keras.Input(shape=(None,), dtype="int32", ragged=True),
    )
    model = keras.Model(inputs, BertPacker(None, cls_id=CLS, sep_id=SEP)(inputs))
    rows_a, rows_b = [[1, 2, 3], [], [4]], [[5], [6, 7], []]
    batch = (
        tf.ragged.constant(rows_a, tf.int32, ragged_rank=1, inner_shape=()),
        tf.ragged.constant(rows_b, tf.int32, ragged_rank=1, inner_shape=()),
    )
    expected = _reference_batch(rows_a, rows_b, None)
    _assert_packed(model(batch), expected)
    assert expected["input_word_ids"].shape == (3, 7)
    path = str(tmp_path / "packer.keras")
    model.save(path)
    _assert_packed(keras.saving.load_model(path)(batch), expected)


def test_config_round_trip():
    packer = BertPacker(64, cls_id=2, sep_id=3, pad_id=0, truncation="waterfall", name="p")
    clone = BertPacker.from_config(packer.get_config())
    assert clone.get_config() == packer.get_config()


def test_bad_arguments():
    with pytest.raises(ValueError, match="seq_length"):
        BertPacker(1, cls_id=CLS, sep_id=SEP)
    with pytest.raises(ValueError, match="truncation"):
        BertPacker(8, cls_id=CLS, sep_id=SEP, truncation="random")
    with pytest.raises(ValueError, match="pairs need seq_length >= 3"):
        BertPacker(2, cls_id=CLS, sep_id=SEP)(
            (tf.ragged.constant([[1]]), tf.ragged.constant([[2]]))
        )
    with pytest.raises(ValueError, match="one or two"):
        BertPacker(8, cls_id=CLS, sep_id=SEP)([tf.ragged.constant([[1]])] * 3)
    with pytest.raises(ValueError, match="different batch sizes"):
        BertPacker(8, cls_id=CLS, sep_id=SEP)(
            (tf.ragged.constant([[1], [2]]), tf.ragged.constant([[3]]))
        )
    spec = tf.RaggedTensorSpec([None, None], tf.int32)
    traced = tf.function(BertPacker(8, cls_id=CLS, sep_id=SEP), input_signature=[(spec, spec)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="different batch sizes"):
        traced((tf.ragged.constant([[1], [2]]), tf.ragged.constant([[3]])))
    with pytest.raises(TypeError, match="integer token ids"):
        BertPacker(8, cls_id=CLS, sep_id=SEP)(tf.ragged.constant([[1.5]]))


def test_tflite_builtins_only():
    """The packer converts to TFLite builtin ops (no Flex, no custom ops) and runs there."""
    from tensorflow.lite.python.interpreter import Interpreter

    packer = BertPacker(12, cls_id=CLS, sep_id=SEP, pad_id=PAD)
    values, splits = tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int64)

    @tf.function(input_signature=[values, splits, values, splits])
    def pack(values_a, splits_a, values_b, splits_b):
        return packer(
            (
                tf.RaggedTensor.from_row_splits(values_a, splits_a, validate=False),
                tf.RaggedTensor.from_row_splits(values_b, splits_b, validate=False),
            )
        )

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [pack.get_concrete_function()], packer
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    runner = Interpreter(model_content=converter.convert()).get_signature_runner()
    rng = random.Random(5)
    rows_a, rows_b = _random_rows(rng, 16, 9), _random_rows(rng, 16, 9)
    feed = {}
    for name, rows in (("a", rows_a), ("b", rows_b)):
        feed[f"values_{name}"] = np.array(sum(rows, []), np.int32)
        feed[f"splits_{name}"] = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    got = runner(**feed)
    _assert_packed(
        {k: tf.constant(v) for k, v in got.items()}, _reference_batch(rows_a, rows_b, 12)
    )
