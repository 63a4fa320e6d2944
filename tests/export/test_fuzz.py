"""Every exported signature on hostile text (tests/export/fuzz_cases.py): a defined answer for each
input, never a crash. The default run feeds ~300 texts; `-m slow` feeds 10,000.

Defined answers: probabilities that sum to 1 with the label of their argmax; encoder inputs
that are exactly the training tokenizer's ids packed as [CLS] A [SEP], over-long texts cut to
their first seq_length - 2 tokens (the documented truncation); a row's answer does not depend
on the batch it came in (length bucketing is invisible).
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from export_cases import SEQ_LENGTH
from finetune_cases import VOCAB
from fuzz_cases import fuzz_batches
from keras_bert.export.source import load_source

ATOL = 1e-5
CLS, SEP, PAD = VOCAB.index("[CLS]"), VOCAB.index("[SEP]"), VOCAB.index("[PAD]")


def check_answers(out, num_rows, labels):
    probabilities = out["probabilities"].numpy()
    assert probabilities.shape == (num_rows, len(labels)) and np.all(np.isfinite(probabilities))
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(out["label_id"], probabilities.argmax(-1))
    assert [s.decode() for s in out["label"].numpy()] == [labels[i] for i in probabilities.argmax(-1)]


def check_packed(inputs, tokens, seq_length, width=None):
    """Rows are [CLS] first-tokens [SEP] then padding; the width is the longest row (or `width`)."""
    ids, mask, types = (inputs[k].numpy() for k in ("input_word_ids", "input_mask", "input_type_ids"))
    lengths = [min(len(t), seq_length - 2) + 2 for t in tokens]
    assert ids.shape == (len(tokens), width or max(lengths, default=2)) and mask.shape == ids.shape
    assert not types.any()
    for row, row_mask, row_tokens, length in zip(ids, mask, tokens, lengths):
        assert row.tolist() == [CLS] + row_tokens[:length - 2] + [SEP] + [PAD] * (len(row) - length)
        assert row_mask.tolist() == [1] * length + [0] * (len(row) - length)


def run_fuzz(sst2, mnli, pretrained, total, sizes):
    """Runs every signature of the three exports on `total` fuzz texts; returns the rows fed."""
    classifier = tf.saved_model.load(sst2["path"]).signatures
    pair = tf.saved_model.load(mnli["path"]).signatures
    preprocessor = tf.saved_model.load(os.path.join(pretrained["hub"], "preprocessor"))
    encoder = tf.saved_model.load(os.path.join(pretrained["hub"], "encoder"))
    tokenizer, hub_tokenizer = load_source(sst2["model_dir"]).tokenizer, load_source(pretrained["checkpoint"]).tokenizer
    rng = np.random.default_rng(1)
    fed = 0
    for batch in fuzz_batches(total, sizes=sizes):
        texts, texts_b = tf.constant(batch, tf.string), tf.constant(batch[::-1], tf.string)
        n = len(batch)
        # The TF Serving export: serving_default, preprocess, predict_ids.
        answers = classifier["serving_default"](text=texts)
        check_answers(answers, n, ["0", "1"])
        inputs = classifier["preprocess"](text=texts)
        check_packed(inputs, tokenizer(texts).to_list(), SEQ_LENGTH)
        logits = classifier["predict_ids"](**inputs)["logits"].numpy()
        np.testing.assert_allclose(tf.nn.softmax(logits), answers["probabilities"], atol=ATOL)
        alone = classifier["serving_default"](text=texts[-1:])  # Its own batch, its own padding.
        np.testing.assert_allclose(alone["probabilities"][0], answers["probabilities"][-1], atol=ATOL)
        check_answers(pair["serving_default"](text=texts, text_b=texts_b), n,
                      ["contradiction", "entailment", "neutral"])
        # The hub pair: preprocessor, tokenize, bert_pack_inputs, encoder and mlm.
        tokens = preprocessor.tokenize(texts)
        assert tokens.shape.rank == 3 and tokens.merge_dims(1, 2).to_list() == hub_tokenizer(texts).to_list()
        packed = preprocessor(texts)
        width = packed["input_word_ids"].shape[1]  # Fixed, as TF Hub's preprocessors.
        check_packed(packed, tokens.merge_dims(1, 2).to_list(), width, width)
        seq_length = int(rng.integers(3, 65))
        pairs = preprocessor.bert_pack_inputs([tokens, preprocessor.tokenize(texts_b)], seq_length=seq_length)
        assert pairs["input_word_ids"].shape == (n, seq_length)
        assert np.all(pairs["input_mask"].numpy().sum(1) <= seq_length)
        outputs = encoder.mlm(dict(packed, masked_lm_positions=tf.zeros([n, 1], tf.int32)))
        assert all(np.all(np.isfinite(outputs[k])) for k in ("pooled_output", "sequence_output", "mlm_logits"))
        fed += n
    return fed


def test_fuzz_every_signature(sst2, mnli, pretrained):
    assert run_fuzz(sst2, mnli, pretrained, total=300, sizes=(1, 3, 17, 64, 250)) == 300


@pytest.mark.slow
def test_fuzz_every_signature_10000_inputs(sst2, mnli, pretrained):
    assert run_fuzz(sst2, mnli, pretrained, total=10_000, sizes=(1, 7, 1000, 64, 250, 1, 31)) == 10_000


def test_empty_batches_and_bad_ids(sst2):
    signatures = tf.saved_model.load(sst2["path"]).signatures
    out = signatures["serving_default"](text=tf.constant([], tf.string))
    assert out["probabilities"].shape == (0, 2) and out["label"].shape == (0,)
    inputs = signatures["preprocess"](text=tf.constant(["the movie", "good"]))
    bad = dict(inputs, input_word_ids=inputs["input_word_ids"] + len(VOCAB))
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_word_ids"):
        signatures["predict_ids"](**bad)
