"""Helpers shared by the checkpoint tests: random weights, outputs, and checks against NumPy."""

import warnings

import numpy as np
import reference

import keras_bert


def random_weights(config, heads=True, next_sentence=True, seed=0):
    """Random arrays for every weight, keyed by Keras path (a model is used only for the shapes)."""
    encoder = keras_bert.BertEncoder(config)
    model = keras_bert.BertPretrainer(encoder, next_sentence=next_sentence) if heads else encoder
    reference.randomize_weights(model, seed=seed)
    return {w.path: w.numpy() for w in model.weights}


def outputs(model, seed=3, batch=3, seq=9, predictions=4):
    """(inputs, outputs without encoder_outputs) on padded random inputs."""
    config = model.encoder.config if isinstance(model, keras_bert.BertPretrainer) else model.config
    rng = np.random.default_rng(seed)
    inputs = reference.random_inputs(rng, config, batch=batch, seq=seq)
    if isinstance(model, keras_bert.BertPretrainer):
        inputs["masked_lm_positions"] = rng.integers(0, seq, size=(batch, predictions)).astype(
            np.int32
        )
    return inputs, {k: v.numpy() for k, v in model(inputs).items() if k != "encoder_outputs"}


def assert_weights_equal(model, weights):
    """Every model weight present in `weights` (by Keras path) and equal, and nothing else there."""
    assert sorted(w.path for w in model.weights) == sorted(weights)
    for w in model.weights:
        np.testing.assert_array_equal(w.numpy(), weights[w.path], err_msg=w.path)


def assert_matches_reference(model, weights):
    """The model's outputs equal the independent NumPy forward pass on `weights`."""
    config = model.encoder.config if isinstance(model, keras_bert.BertPretrainer) else model.config
    inputs, got = outputs(model)
    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    args = (w64, config, inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"])
    if isinstance(model, keras_bert.BertPretrainer):
        w64.setdefault(
            "cls_seq_relationship/kernel", np.zeros((config.hidden_size, 2))
        )  # Unused without NSP.
        w64.setdefault("cls_seq_relationship/bias", np.zeros(2))
        mlm, nsp = reference.pretrainer_forward(*args, inputs["masked_lm_positions"])
        np.testing.assert_allclose(got["mlm_logits"], mlm, atol=1e-4, rtol=1e-4)
        if model.next_sentence_head is not None:
            np.testing.assert_allclose(got["nsp_logits"], nsp, atol=1e-5, rtol=1e-5)
    else:
        seq, pooled, _ = reference.encoder_forward(*args)
        np.testing.assert_allclose(got["sequence_output"], seq, atol=1e-5)
        np.testing.assert_allclose(got["pooled_output"], pooled, atol=1e-5)


def assert_same_outputs(model, other):
    """Identical outputs (bit for bit) of two models on the same inputs."""
    _, want = outputs(model)
    _, got = outputs(other)
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def load_quietly(load, path):
    """`load(path)`, failing on any warning (unused variables are warned about)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load(path)
