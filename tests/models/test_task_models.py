"""Task models: each head's logits against NumPy on the encoder's own outputs, float32 outputs
under mixed precision, .keras round trips, and a pooler that trains only under a head that
reads it."""

import os
import warnings

import keras
import numpy as np
import pytest

import keras_bert
from keras_bert.models.documents import DocumentClassifier
from keras_bert.models.electra import ElectraPretrainer
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.models.task_models import (
    BertClassifier,
    BertMultipleChoice,
    BertSpanLabeler,
    BertTokenClassifier,
)

CONFIG = dict(
    vocab_size=50,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=16,
)
IDS = np.array([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]], np.int32)
INPUTS = {
    "input_word_ids": IDS,
    "input_mask": (IDS > 0).astype(np.int32),
    "input_type_ids": np.zeros_like(IDS),
}


def _encoder(dtype=None):
    return keras_bert.BertEncoder(keras_bert.BertConfig(**CONFIG), dtype=dtype)


def _dense(model, name):
    layer = model.get_layer(name)
    return layer.kernel.numpy(), layer.bias.numpy()


@pytest.mark.parametrize(
    "cls, output, args",
    [
        (BertClassifier, "pooled_output", (3,)),
        (BertTokenClassifier, "sequence_output", (4,)),
        (BertSpanLabeler, "sequence_output", ()),
    ],
)
def test_heads_against_numpy_and_round_trip(cls, output, args, tmp_path):
    encoder = _encoder()
    model = cls(encoder, *args)
    out = model(INPUTS)
    states = encoder(INPUTS)[output].numpy()
    kernel, bias = _dense(model, "span_logits" if cls is BertSpanLabeler else "classifier")
    expected = states @ kernel + bias
    if cls is BertSpanLabeler:
        np.testing.assert_allclose(out["start_logits"], expected[..., 0], atol=1e-5)
        np.testing.assert_allclose(out["end_logits"], expected[..., 1], atol=1e-5)
    else:
        np.testing.assert_allclose(out["logits"], expected, atol=1e-5)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded) is cls
    for key, value in reloaded(INPUTS).items():
        np.testing.assert_allclose(value, out[key], atol=1e-6)


def test_multiple_choice_scores_each_choice_alone(tmp_path):
    encoder = _encoder()
    model = BertMultipleChoice(encoder)
    choices = {k: np.stack([v, v[::-1], v], axis=1) for k, v in INPUTS.items()}  # (B=2, K=3, S)
    logits = model(choices)["logits"].numpy()
    assert logits.shape == (2, 3)
    kernel, bias = _dense(model, "classifier")
    for k in range(3):
        pooled = encoder({name: v[:, k] for name, v in choices.items()})["pooled_output"].numpy()
        np.testing.assert_allclose(logits[:, k], (pooled @ kernel + bias)[:, 0], atol=1e-5)
    path = os.path.join(tmp_path, "choice.keras")
    model.save(path)
    np.testing.assert_allclose(keras.saving.load_model(path)(choices)["logits"], logits, atol=1e-6)


def test_logits_are_float32_under_mixed_precision():
    model = BertClassifier(_encoder("mixed_bfloat16"), 2)
    assert model(INPUTS)["logits"].dtype == "float32"
    with pytest.raises(ValueError, match="num_classes"):
        BertClassifier(_encoder(), 0)
    with pytest.raises(TypeError, match="BertEncoder"):
        BertClassifier(keras.layers.Dense(3), 2)


def test_mean_pooled_classifier_against_numpy_padding_and_round_trip(tmp_path):
    """pooling="mean": the head reads the mean of the tokens' `sequence_output` (padding
    excluded), not `pooled_output`; more padding gives the same logits; .keras keeps it."""
    encoder = _encoder()
    model = BertClassifier(encoder, 3, pooling="mean")
    out = model(INPUTS)["logits"].numpy()
    states = encoder(INPUTS)["sequence_output"].numpy()  # (B, S, H)
    lengths = INPUTS["input_mask"].sum(1)
    means = np.stack([states[b, : lengths[b]].mean(0) for b in range(len(IDS))])  # (B, H)
    kernel, bias = _dense(model, "classifier")
    np.testing.assert_allclose(out, means @ kernel + bias, atol=1e-5)
    pooled = encoder(INPUTS)["pooled_output"].numpy()
    assert np.abs(out - (pooled @ kernel + bias)).max() > 1e-3  # Not the [CLS] head.
    padded = {k: np.pad(v, [(0, 0), (0, 4)]) for k, v in INPUTS.items()}
    np.testing.assert_allclose(model(padded)["logits"].numpy(), out, atol=1e-5)
    assert model.get_config()["pooling"] == "mean"
    path = os.path.join(tmp_path, "mean.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.pooling == "mean"
    np.testing.assert_allclose(reloaded(INPUTS)["logits"], out, atol=1e-6)
    mixed = BertClassifier(_encoder("mixed_bfloat16"), 2, pooling="mean")
    assert mixed(INPUTS)["logits"].dtype == "float32"
    with pytest.raises(ValueError, match="pooling must be one of"):
        BertClassifier(_encoder(), 2, pooling="max")


def _pooler_trains(model):
    trainable = {id(v) for v in model.trainable_weights}
    flags = {id(v) in trainable for v in model.encoder.pooler.weights}
    assert len(flags) == 1, "the pooler's kernel and bias disagree"
    return flags.pop()


def test_the_pooler_trains_only_under_a_head_that_reads_it(tmp_path):
    """A head on the tokens gives the pooler no gradient, so it is not trained: no "Gradients do
    not exist" warning at every fit, and no weight decay shrinking it alone (JAX's zero
    gradient). Heads on [CLS] train it; the last head built on a shared encoder decides."""
    heads = {
        "cls": (lambda e: BertClassifier(e, 2), True),
        "mean": (lambda e: BertClassifier(e, 2, pooling="mean"), False),
        "tokens": (lambda e: BertTokenClassifier(e, 3), False),
        "spans": (lambda e: BertSpanLabeler(e), False),
        "choices": (lambda e: BertMultipleChoice(e), True),
        "documents_cls": (lambda e: DocumentClassifier(e, 2), True),
        "documents_mean": (lambda e: DocumentClassifier(e, 2, token_pooling="mean"), False),
        "mlm_nsp": (lambda e: BertPretrainer(e), True),
        "mlm": (lambda e: BertPretrainer(e, next_sentence=False), False),
        "electra": (lambda e: ElectraPretrainer(e, generator_size=0.5), False),
    }
    for name, (build, reads) in heads.items():
        assert _pooler_trains(build(_encoder())) is reads, name
    shared = _encoder()
    BertClassifier(shared, 2, pooling="mean")
    assert _pooler_trains(BertClassifier(shared, 2)) is True

    model = BertClassifier(_encoder(), 2, pooling="mean")
    path = os.path.join(tmp_path, "mean.keras")
    model.save(path)
    assert _pooler_trains(keras.saving.load_model(path)) is False

    # A fit with the package's own optimizer (AdamW, weight decay 0.01): no warning, the
    # pooler as it was, the head moved.
    model.compile()
    pooler = [w.numpy().copy() for w in model.encoder.pooler.weights]
    head = model.get_layer("classifier").kernel.numpy().copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(INPUTS, np.array([0, 1]), epochs=2, verbose=0)
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    for before, after in zip(pooler, model.encoder.pooler.weights):
        np.testing.assert_array_equal(after.numpy(), before)
    assert np.abs(model.get_layer("classifier").kernel.numpy() - head).max() > 0
