"""BertEncoder and BertPretrainer against the independent NumPy forward pass in
tests/reference.py."""

import numpy as np
import pytest
import reference
import tensorflow as tf

import keras_bert

CONFIGS = [
    dict(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
    ),
    dict(
        vocab_size=50,
        hidden_size=24,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=40,
        type_vocab_size=3,
        max_position_embeddings=20,
    ),
    dict(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=16,
        hidden_act="gelu_new",
    ),
]


def _np_gelu_tanh_patch(monkeypatch):
    monkeypatch.setattr(
        reference,
        "gelu",
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    )


@pytest.mark.parametrize("fields", CONFIGS)
def test_encoder_matches_numpy(fields, monkeypatch):
    if fields.get("hidden_act") == "gelu_new":
        _np_gelu_tanh_patch(monkeypatch)
    config = keras_bert.BertConfig(**fields)
    encoder = keras_bert.BertEncoder(config)
    reference.randomize_weights(encoder, seed=1)
    inputs = reference.random_inputs(np.random.default_rng(0), config, batch=4, seq=9)
    out = encoder(inputs, training=False)
    seq, pooled, layers = reference.encoder_forward(
        reference.weights_by_path(encoder), config, **_np_args(inputs)
    )
    np.testing.assert_allclose(out["sequence_output"], seq, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], pooled, atol=1e-5, rtol=1e-5)
    assert len(out["encoder_outputs"]) == config.num_hidden_layers
    for got, want in zip(out["encoder_outputs"], layers):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_padding_does_not_change_real_positions():
    """Extra padding at the end leaves the outputs at real positions unchanged."""
    config = keras_bert.BertConfig(**CONFIGS[0])
    encoder = keras_bert.BertEncoder(config)
    reference.randomize_weights(encoder, seed=2)
    inputs = reference.random_inputs(np.random.default_rng(3), config, batch=2, seq=6)
    padded = {k: np.pad(v, [(0, 0), (0, 5)]) for k, v in inputs.items()}
    short = encoder(inputs)["sequence_output"].numpy()
    long = encoder(padded)["sequence_output"].numpy()
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(long[:, :6][real], short[real], atol=1e-5)


def test_pretrainer_matches_numpy():
    config = keras_bert.BertConfig(**CONFIGS[0])
    pretrainer = keras_bert.BertPretrainer(keras_bert.BertEncoder(config))
    reference.randomize_weights(pretrainer, seed=4)
    rng = np.random.default_rng(5)
    inputs = reference.random_inputs(rng, config, batch=3, seq=10)
    positions = np.sort(rng.integers(0, 6, size=(3, 4)), axis=1).astype(np.int32)
    out = pretrainer({**inputs, "masked_lm_positions": positions}, training=False)
    mlm, nsp = reference.pretrainer_forward(
        reference.weights_by_path(pretrainer), config, **_np_args(inputs), positions=positions
    )
    np.testing.assert_allclose(out["mlm_logits"], mlm, atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(out["nsp_logits"], nsp, atol=1e-5, rtol=1e-5)


def test_pretraining_loss_matches_numpy():
    """MLM cross-entropy averaged over real masked positions (weights), plus mean NSP
    cross-entropy."""
    rng = np.random.default_rng(6)
    logits = rng.normal(size=(3, 4, 11)).astype(np.float32)
    ids = rng.integers(0, 11, size=(3, 4))
    weights = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], np.float32)
    nsp_logits = rng.normal(size=(3, 2)).astype(np.float32)
    nsp_labels = np.array([[0], [1], [1]])
    losses = keras_bert.models.pretrainer.pretraining_loss(
        {"masked_lm_ids": ids, "masked_lm_weights": weights, "next_sentence_labels": nsp_labels},
        {"mlm_logits": tf.constant(logits), "nsp_logits": tf.constant(nsp_logits)},
    )

    def xent(lg, y):
        lg = lg - lg.max(-1, keepdims=True)
        logp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, y[..., None], -1)[..., 0]

    mlm = (xent(logits, ids) * weights).sum() / (weights.sum() + 1e-5)
    nsp = xent(nsp_logits, nsp_labels[:, 0]).mean()
    np.testing.assert_allclose(losses["mlm_loss"], mlm, rtol=1e-5)
    np.testing.assert_allclose(losses["nsp_loss"], nsp, rtol=1e-5)
    np.testing.assert_allclose(losses["loss"], mlm + nsp, rtol=1e-5)


def test_mlm_head_is_tied_to_word_embeddings():
    config = keras_bert.BertConfig(**CONFIGS[0])
    pretrainer = keras_bert.BertPretrainer(keras_bert.BertEncoder(config))
    table_ids = {id(w) for w in pretrainer.weights if w.path.endswith("word_embeddings")}
    assert (
        len(table_ids) == 1
    )  # One variable, used by both the embedding lookup and the output layer.
    n_embeddings = config.vocab_size * config.hidden_size
    head = (
        config.hidden_size * config.hidden_size
        + config.hidden_size  # transform dense
        + 2 * config.hidden_size
        + config.vocab_size  # LayerNorm + output bias
        + 2 * config.hidden_size
        + 2
    )  # NSP
    assert pretrainer.count_params() == pretrainer.encoder.count_params() + head
    assert n_embeddings < pretrainer.count_params()


def _np_args(inputs):
    return dict(
        word_ids=inputs["input_word_ids"],
        mask=inputs["input_mask"],
        type_ids=inputs["input_type_ids"],
    )
