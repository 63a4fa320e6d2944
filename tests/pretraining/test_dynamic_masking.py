"""Dynamic masking in tf.data: new masks every epoch, seeded, the masking statistics, whole
words."""

import generated_corpus
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.pretraining.dynamic import dynamic_masking
from keras_bert.text.tokenizer import BertTokenizer

S = 48


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(generated_corpus.VOCABULARY)


@pytest.fixture(scope="module")
def packed(tokenizer):
    """[CLS] sentence [SEP] sentence [SEP] rows of the generated corpus, padded to S."""
    sentences = [s for d in generated_corpus.documents(200, seed=4) for s in d]
    ids = tokenizer(tf.constant(sentences))[:, :20]
    cls = tf.fill([ids.nrows() // 2, 1], tokenizer.cls_id)
    sep = tf.fill([ids.nrows() // 2, 1], tokenizer.sep_id)
    first, second = ids[0::2][: ids.nrows() // 2], ids[1::2][: ids.nrows() // 2]
    rows = tf.concat([cls, first, sep, second, sep], axis=1)
    types = tf.concat(
        [tf.zeros_like(tf.concat([cls, first, sep], 1)), tf.ones_like(tf.concat([second, sep], 1))],
        1,
    )
    return {
        "input_word_ids": rows.to_tensor(0, shape=[None, S]).numpy(),
        "input_type_ids": types.to_tensor(0, shape=[None, S]).numpy(),
        "next_sentence_labels": np.arange(rows.nrows()) % 2,
    }


def _epoch(dataset):
    batches = list(dataset.as_numpy_iterator())
    return [{k: np.concatenate([b[i][k] for b in batches]) for k in batches[0][i]} for i in (0, 1)]


def test_masks_differ_each_epoch_and_follow_the_seed(tokenizer, packed):
    ds = tf.data.Dataset.from_tensor_slices(packed).batch(128)
    masked = dynamic_masking(ds, tokenizer, max_predictions_per_seq=8, seed=3)
    first, second = _epoch(masked), _epoch(masked)
    assert not np.array_equal(first[0]["masked_lm_positions"], second[0]["masked_lm_positions"])
    again = _epoch(dynamic_masking(ds, tokenizer, max_predictions_per_seq=8, seed=3))
    for key in first[0]:
        np.testing.assert_array_equal(first[0][key], again[0][key])
    # Everything but the masks passes through, typed as the records reader's batches.
    np.testing.assert_array_equal(first[0]["input_type_ids"], packed["input_type_ids"])
    np.testing.assert_array_equal(first[0]["input_mask"], packed["input_word_ids"] != 0)
    np.testing.assert_array_equal(
        first[1]["next_sentence_labels"][:, 0], packed["next_sentence_labels"]
    )
    assert (
        first[0]["input_word_ids"].dtype == np.int32
        and first[1]["masked_lm_weights"].dtype == np.float32
    )


@pytest.mark.parametrize("whole_word", [False, True])
def test_masking_statistics(tokenizer, packed, whole_word):
    P = 100 if not whole_word else 4
    ds = tf.data.Dataset.from_tensor_slices(packed).batch(128)
    inputs, labels = _epoch(
        dynamic_masking(ds, tokenizer, P, whole_word_masking=whole_word, seed=1)
    )
    ids = packed["input_word_ids"]
    special = np.isin(ids, [tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id])
    weights = labels["masked_lm_weights"]
    rows, slots = np.nonzero(weights)
    positions = inputs["masked_lm_positions"][rows, slots]
    chosen = np.zeros(ids.shape, bool)
    chosen[rows, positions] = True
    assert not (chosen & special).any()
    np.testing.assert_array_equal(labels["masked_lm_ids"][rows, slots], ids[rows, positions])
    assert np.all(np.diff(inputs["masked_lm_positions"], axis=1)[weights[:, 1:] > 0] > 0)
    np.testing.assert_array_equal(inputs["input_word_ids"][~chosen], ids[~chosen])
    is_cont = np.array([t.startswith("##") for t in tokenizer.vocabulary])[ids]
    if whole_word:
        inner = is_cont[:, 1:] & ~special[:, :-1]
        np.testing.assert_array_equal(chosen[:, 1:][inner], chosen[:, :-1][inner])
        assert (chosen & is_cont).sum() > 50 and weights.sum(1).max() <= P
    else:  # ceil(15% of the selectable tokens), as tensorflow-text's RandomItemSelector.
        np.testing.assert_array_equal(weights.sum(1), np.ceil((~special).sum(1) * 0.15))
        new, old = inputs["input_word_ids"][rows, positions], ids[rows, positions]
        is_mask = new == tokenizer.mask_id
        same = (new == old) & ~is_mask
        assert len(new) > 2000
        assert abs(is_mask.mean() - 0.8) < 0.03
        assert abs(same.mean() - 0.1) < 0.03
        assert abs((~is_mask & ~same).mean() - 0.1) < 0.03


def test_batches_feed_bert_pretrainer_and_bad_input(tokenizer, packed):
    from keras_bert import BertConfig, BertEncoder, BertPretrainer
    from keras_bert.models.pretrainer import pretraining_loss

    ds = tf.data.Dataset.from_tensor_slices(packed).batch(8).take(1)
    inputs, labels = next(iter(dynamic_masking(ds, tokenizer, max_predictions_per_seq=6)))
    model = BertPretrainer(BertEncoder(BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size)))
    losses = pretraining_loss(labels, model(inputs))
    assert np.isfinite(float(losses["mlm_loss"])) and np.isfinite(float(losses["nsp_loss"]))
    with pytest.raises(KeyError, match="input_word_ids"):
        dynamic_masking(tf.data.Dataset.from_tensor_slices({"ids": [[1, 2]]}).batch(1), tokenizer)
    with pytest.raises(ValueError, match="masked_lm_prob"):
        dynamic_masking(ds, tokenizer, masked_lm_prob=0.0)


def test_from_raw_text(tokenizer):
    from keras_bert.pretraining.dynamic import pack_texts

    texts = [s for d in generated_corpus.documents(30, seed=6) for s in d]
    ds = tf.data.Dataset.from_tensor_slices(texts).batch(64)
    inputs, labels = _epoch(dynamic_masking(pack_texts(ds, tokenizer, 24), tokenizer, 5, seed=2))
    expected = [
        [tokenizer.cls_id] + ids[:22] + [tokenizer.sep_id]
        for ids in tokenizer(tf.constant(texts)).to_list()
    ]
    rows, slots = np.nonzero(labels["masked_lm_weights"])
    for r, p, label in zip(
        rows, inputs["masked_lm_positions"][rows, slots], labels["masked_lm_ids"][rows, slots]
    ):
        assert expected[r][p] == label and 0 < p < len(expected[r]) - 1
    np.testing.assert_array_equal(inputs["input_mask"].sum(1), [len(e) for e in expected])
    assert "next_sentence_labels" not in labels


def test_from_records_with_original_names(tmp_path, tokenizer):
    from keras_bert.pretraining import records
    from keras_bert.pretraining.create_pretraining_data import create_pretraining_data

    vocab_file = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(40, seed=9)
    )
    files = create_pretraining_data(
        corpus,
        str(tmp_path / "records"),
        vocab_file,
        max_seq_length=S,
        max_predictions_per_seq=6,
        dupe_factor=1,
    )
    spec = {
        k: v
        for k, v in records.feature_spec(S, 6).items()
        if k in ("input_ids", "input_mask", "segment_ids", "next_sentence_labels")
    }
    ds = tf.data.TFRecordDataset(files).batch(32).map(lambda r: tf.io.parse_example(r, spec))
    inputs, labels = _epoch(dynamic_masking(ds, vocab_file, 6, seed=5))
    raw = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]
    ids = np.stack([r["input_ids"].numpy() for r in raw])
    rows, slots = np.nonzero(labels["masked_lm_weights"])
    np.testing.assert_array_equal(
        labels["masked_lm_ids"][rows, slots], ids[rows, inputs["masked_lm_positions"][rows, slots]]
    )
    np.testing.assert_array_equal(
        inputs["input_type_ids"], np.stack([r["segment_ids"].numpy() for r in raw])
    )
    np.testing.assert_array_equal(
        labels["next_sentence_labels"], np.stack([r["next_sentence_labels"].numpy() for r in raw])
    )
