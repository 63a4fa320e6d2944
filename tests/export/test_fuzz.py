"""Every exported signature on hostile text (tests/export/fuzz_cases.py): a defined answer for each
input, never a crash. The default run feeds ~300 texts; `-m slow` feeds 10,000.

Defined answers: probabilities that sum to 1 with the label of their argmax; encoder inputs
that are exactly the training tokenizer's ids packed as [CLS] A [SEP], over-long texts cut to
their first seq_length - 2 tokens (the documented truncation); a row's answer does not depend
on the batch it came in (length bucketing is invisible); NER entities, SQuAD answers and their
code point offsets that are exact substrings of the text (or no entity, or "" and -1).
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


# (texts fed, batch sizes): the default run, and `-m slow`.
RUNS = [pytest.param(300, (1, 3, 17, 64, 250), id="300"),
        pytest.param(10_000, (1, 7, 1000, 64, 250, 1, 31), id="10000", marks=pytest.mark.slow)]


@pytest.mark.parametrize("total, sizes", RUNS)
def test_fuzz_every_signature(sst2, mnli, pretrained, total, sizes):
    assert run_fuzz(sst2, mnli, pretrained, total, sizes) == total


def test_empty_batches_and_bad_ids(sst2):
    signatures = tf.saved_model.load(sst2["path"]).signatures
    out = signatures["serving_default"](text=tf.constant([], tf.string))
    assert out["probabilities"].shape == (0, 2) and out["label"].shape == (0,)
    inputs = signatures["preprocess"](text=tf.constant(["the movie", "good"]))
    bad = dict(inputs, input_word_ids=inputs["input_word_ids"] + len(VOCAB))
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_word_ids"):
        signatures["predict_ids"](**bad)


def run_task_fuzz(conll, swag, squad, total, sizes):
    """NER, SWAG and SQuAD serving_default on `total` fuzz texts: entities and answers are exact
    substrings at their code point offsets, probabilities sum to 1; returns the rows fed."""
    ner, choice, span = (tf.saved_model.load(e["path"]).signatures["serving_default"] for e in (conll, swag, squad))
    fed = 0
    for batch in fuzz_batches(total, seed=2, sizes=sizes):
        texts = tf.constant(batch, tf.string)
        n = len(batch)
        out = ner(text=texts)
        counts = out["entity_count"].numpy()
        assert out["entity_text"].shape == (n, max(counts, default=0))
        for i, text in enumerate(batch):
            decoded = text.decode("utf-8", "replace")
            for j in range(counts[i]):
                start, end = int(out["start_char"][i, j]), int(out["end_char"][i, j])
                assert 0 <= start < end <= len(decoded) and out["entity_type"][i, j].numpy() in (b"PER", b"ORG", b"LOC",
                                                                                                b"MISC")
                assert decoded[start:end] == out["entity_text"][i, j].numpy().decode("utf-8", "replace")
        endings = tf.stack([tf.roll(texts, i, 0) for i in range(4)], 1)  # (n, 4)
        probabilities = choice(context=texts[::-1], endings=endings)["probabilities"].numpy()
        assert probabilities.shape == (n, 4) and np.all(np.isfinite(probabilities))
        np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
        out = span(question=texts[::-1], context=texts)
        for i, text in enumerate(batch):
            start, end, answer = int(out["start_char"][i]), int(out["end_char"][i]), out["answer"][i].numpy()
            if out["has_answer"][i]:
                assert text.decode("utf-8", "replace")[start:end] == answer.decode("utf-8", "replace") != ""
            else:
                assert (answer, start, end) == (b"", -1, -1)
        assert np.all(np.isfinite(out["null_odds"])) and not np.any(np.isnan(out["score"]))
        fed += n
    return fed


@pytest.mark.parametrize("total, sizes", RUNS)
def test_fuzz_task_signatures(conll, swag, squad2, total, sizes):
    assert run_task_fuzz(conll, swag, squad2, total, sizes) == total
