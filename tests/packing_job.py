"""Packed rows against instances alone, on the current Keras backend (for
tests/pretraining/test_packing.py).

Usage: KERAS_BACKEND=<jax|tensorflow> python packing_job.py  (exits 0 when every check passes)

`check_packed_equals_alone()` builds a tiny encoder and pre-trainer, packs three instances of
different lengths into one row (with padding) and asserts that each gets the sequence output,
pooled output, masked-LM and NSP logits and losses it gets alone (float32, 1e-5), and that
changing one instance's tokens leaves the others' outputs unchanged; `check_fit()` trains the
packed pre-trainer for a few steps.
"""

import keras
import numpy as np

from keras_bert.config import BertConfig
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer, pretraining_loss
from keras_bert.pretraining import packing

LENGTHS = (7, 5, 9)
SEQ = 24  # 3 padding tokens after the packed instances
PREDICTIONS = 3  # per instance alone


def _instances(rng, vocab):
    """Unpacked features (the original names) of len(LENGTHS) instances, rows of SEQ."""
    n = len(LENGTHS)
    features = {
        name: np.zeros((n, SEQ), np.int64) for name in ("input_ids", "input_mask", "segment_ids")
    }
    features["masked_lm_positions"] = np.zeros((n, PREDICTIONS), np.int64)
    features["masked_lm_ids"] = rng.integers(5, vocab, (n, PREDICTIONS))
    features["masked_lm_weights"] = np.ones((n, PREDICTIONS), np.float32)
    features["masked_lm_weights"][1, 2] = 0.0  # one padding prediction
    features["next_sentence_labels"] = np.array([[0], [1], [1]])
    for i, n_tokens in enumerate(LENGTHS):
        features["input_ids"][i, :n_tokens] = rng.integers(5, vocab, n_tokens)
        features["input_ids"][i, 0] = 2  # [CLS]
        features["input_mask"][i, :n_tokens] = 1
        features["segment_ids"][i, n_tokens // 2 : n_tokens] = 1
        features["masked_lm_positions"][i] = np.sort(
            rng.choice(np.arange(1, n_tokens), PREDICTIONS, replace=False)
        )
    features["masked_lm_positions"][1, 2] = 0
    return features


def _packed_batch(packed):
    i32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
    inputs = {
        "input_word_ids": i32(packed["input_ids"]),
        "input_type_ids": i32(packed["segment_ids"]),
        "input_position_ids": i32(packed["position_ids"]),
        "input_instance_ids": i32(packed["instance_ids"]),
        "masked_lm_positions": i32(packed["masked_lm_positions"]),
        "cls_positions": i32(packed["cls_positions"]),
    }
    labels = {k: packed[k] for k in ("masked_lm_ids", "masked_lm_weights")}
    labels["next_sentence_labels"] = packed["next_sentence_labels"]
    labels["next_sentence_weights"] = packed["next_sentence_weights"]
    return inputs, labels


def tiny_config(vocab_size=40, max_position_embeddings=32, num_hidden_layers=2):
    """A tiny float32 architecture for the packing tests."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=max_position_embeddings,
    )


def _models():
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(tiny_config())
    alone = BertPretrainer(encoder)
    packed = BertPretrainer(encoder, packed=True)
    packed.masked_lm_head.set_weights(alone.masked_lm_head.get_weights())
    packed.next_sentence_head.set_weights(alone.next_sentence_head.get_weights())
    return encoder, alone, packed


def _np(x):
    return keras.ops.convert_to_numpy(x)


def check_packed_equals_alone(atol=1e-5):
    encoder, alone, packed_model = _models()
    features = _instances(np.random.default_rng(0), 40)
    packed, bins = packing.pack_examples(features, max_instances=4, max_predictions=12)
    assert len(bins) == 1 and packed["input_ids"].shape == (1, SEQ), bins
    order = bins[0]  # instances in row order (longest first)
    inputs, labels = _packed_batch(packed)
    alone_inputs = {
        "input_word_ids": features["input_ids"].astype("int32"),
        "input_mask": features["input_mask"].astype("int32"),
        "input_type_ids": features["segment_ids"].astype("int32"),
        "masked_lm_positions": features["masked_lm_positions"].astype("int32"),
    }
    enc_alone = encoder(
        {k: alone_inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    )
    enc_packed = encoder.encode_packed(inputs, inputs["cls_positions"])
    seq_alone, seq_packed = _np(enc_alone["sequence_output"]), _np(enc_packed["sequence_output"])[0]
    pooled_alone, pooled_packed = (
        _np(enc_alone["pooled_output"]),
        _np(enc_packed["pooled_output"])[0],
    )
    out_alone = {k: _np(v) for k, v in alone(alone_inputs, training=False).items()}
    out_packed = {k: _np(v) for k, v in packed_model(inputs, training=False).items()}
    start, p = 0, 0
    for k, item in enumerate(order):
        n = LENGTHS[item]
        np.testing.assert_allclose(seq_packed[start : start + n], seq_alone[item, :n], atol=atol)
        np.testing.assert_allclose(pooled_packed[k], pooled_alone[item], atol=atol)
        np.testing.assert_allclose(
            out_packed["nsp_logits"][0, k], out_alone["nsp_logits"][item], atol=atol
        )
        real = features["masked_lm_weights"][item] > 0
        m = int(real.sum())
        np.testing.assert_allclose(
            out_packed["mlm_logits"][0, p : p + m], out_alone["mlm_logits"][item][real], atol=atol
        )
        start, p = start + n, p + m
    loss_alone = pretraining_loss(
        {k: features[k] for k in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")},
        out_alone,
    )
    loss_packed = pretraining_loss(labels, out_packed)
    for key in ("mlm_loss", "nsp_loss", "loss"):
        np.testing.assert_allclose(_np(loss_packed[key]), _np(loss_alone[key]), rtol=atol)
    _check_no_cross_attention(encoder, inputs, order, seq_packed)


def _check_no_cross_attention(encoder, inputs, order, seq_packed):
    """New tokens in the middle instance leave the other instances' outputs unchanged."""
    starts = np.cumsum([0] + [LENGTHS[i] for i in order])
    changed = dict(inputs)
    ids = inputs["input_word_ids"].copy()
    ids[0, starts[1] + 1 : starts[2]] = (ids[0, starts[1] + 1 : starts[2]] + 7) % 35 + 5
    changed["input_word_ids"] = ids
    out = encoder.encode_packed(changed, inputs["cls_positions"])
    seq = _np(out["sequence_output"])[0]
    for k in (0, 2):
        span = slice(starts[k], starts[k + 1])
        np.testing.assert_allclose(seq[span], seq_packed[span], atol=1e-6)
    middle = slice(starts[1], starts[2])
    assert np.abs(seq[middle] - seq_packed[middle]).max() > 1e-3  # the change took effect


def check_fit():
    """Two training steps of the packed pre-trainer on a packed batch: finite, falling loss."""
    _, _, model = _models()
    features = _instances(np.random.default_rng(1), 40)
    inputs, labels = _packed_batch(packing.pack_examples(features, 4, 12)[0])
    assert_fit_lowers_loss(model, inputs, labels, epochs=3)


def assert_fit_lowers_loss(model, inputs, labels, epochs):
    """`fit` (Adam 1e-2) for `epochs` on one batch gives a finite, lower loss."""
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    losses = model.fit(inputs, labels, epochs=epochs, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses


if __name__ == "__main__":
    check_packed_equals_alone()
    check_fit()
    print("ok", keras.config.backend())
