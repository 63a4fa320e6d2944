"""BertEncoder / BertPretrainer as Keras objects: serialization, precision policies, XLA, lengths,
bad input."""

import keras
import numpy as np
import pytest
import reference
import tensorflow as tf

import keras_bert
from keras_bert.inputs import INPUT_NAMES

TINY = keras_bert.BertConfig(
    vocab_size=83,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=24,
)


def _inputs(seq=10, batch=3, seed=0):
    return reference.random_inputs(np.random.default_rng(seed), TINY, batch=batch, seq=seq)


def _positions(batch=3, count=4, seed=1):
    return np.sort(np.random.default_rng(seed).integers(1, 5, size=(batch, count)), axis=1).astype(
        np.int32
    )


def test_keras_save_and_reload_give_identical_outputs(tmp_path):
    pretrainer = keras_bert.BertPretrainer(keras_bert.BertEncoder(TINY))
    reference.randomize_weights(pretrainer, seed=3)
    x = {**_inputs(), "masked_lm_positions": _positions()}
    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, keras_bert.BertPretrainer)
    assert restored.encoder.config == TINY
    for key, value in pretrainer(x).items():
        np.testing.assert_array_equal(restored(x)[key], value)
    # The tie survives the reload: one word-embedding variable.
    assert len([w for w in restored.weights if w.path.endswith("word_embeddings")]) == 1


def test_encoder_config_round_trip_and_save(tmp_path):
    encoder = keras_bert.BertEncoder(TINY, name="my_encoder")
    clone = keras_bert.BertEncoder.from_config(encoder.get_config())
    assert clone.config == TINY and clone.name == "my_encoder"
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    restored = keras.saving.load_model(path)
    x = _inputs()
    np.testing.assert_array_equal(restored(x)["sequence_output"], encoder(x)["sequence_output"])


@pytest.mark.parametrize(
    "layer",
    [
        keras_bert.layers.BertEmbeddings(
            50, 16, 20, 2, dropout=0.2, layer_norm_eps=1e-6, initializer_range=0.05
        ),
        keras_bert.layers.TransformerBlock(
            num_attention_heads=2,
            intermediate_size=24,
            hidden_act="relu",
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.3,
        ),
    ],
)
def test_layer_config_round_trip(layer):
    clone = layer.__class__.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()


def test_encoder_inside_a_functional_model(tmp_path):
    """An encoder used as a layer of a user's model: classifier on pooled_output, trains, saves and
    reloads."""
    encoder = keras_bert.BertEncoder(TINY)
    inputs = keras_bert.models.encoder.encoder_inputs()
    logits = keras.layers.Dense(3, name="classifier")(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    x = _inputs(batch=6)
    y = np.array([0, 1, 2, 0, 1, 2])
    history = model.fit(x, y, epochs=3, batch_size=6, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    np.testing.assert_allclose(
        keras.saving.load_model(path).predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6
    )


@pytest.mark.parametrize("policy,tolerance", [("mixed_float16", 2e-2), ("mixed_bfloat16", 1e-1)])
def test_mixed_precision_tracks_float32(policy, tolerance):
    encoder32 = keras_bert.BertEncoder(TINY)
    pretrainer32 = keras_bert.BertPretrainer(encoder32)
    reference.randomize_weights(pretrainer32, seed=5, scale=0.05)
    keras.config.set_dtype_policy(policy)
    pretrainer16 = keras_bert.BertPretrainer(keras_bert.BertEncoder(TINY))
    assert (
        pretrainer16.encoder.embeddings.word_embeddings.dtype == "float32"
    )  # Variables stay float32.
    pretrainer16.set_weights(pretrainer32.get_weights())
    x = {**_inputs(), "masked_lm_positions": _positions()}
    out16 = pretrainer16(x)
    assert (
        pretrainer16.encoder(_inputs())["sequence_output"].dtype
        == keras.mixed_precision.Policy(policy).compute_dtype
    )
    assert out16["mlm_logits"].dtype == "float32"  # Logits (and losses) in float32.
    out32 = pretrainer32(x)
    for key in out32:
        np.testing.assert_allclose(out16[key], out32[key], atol=tolerance * 10, rtol=tolerance)


def test_dtype_policy_argument_survives_save(tmp_path):
    encoder = keras_bert.BertEncoder(TINY, dtype="mixed_bfloat16")
    assert encoder.dtype_policy.name == "mixed_bfloat16"
    assert encoder(_inputs())["sequence_output"].dtype == "bfloat16"
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    restored = keras.saving.load_model(path)
    assert restored.dtype_policy.name == "mixed_bfloat16"
    assert restored(_inputs())["sequence_output"].dtype == "bfloat16"


def test_mixed_float16_training_step_uses_loss_scaling():
    keras.config.set_dtype_policy("mixed_float16")
    pretrainer = keras_bert.BertPretrainer(keras_bert.BertEncoder(TINY))
    pretrainer.compile(optimizer=keras.optimizers.Adam(1e-3))
    assert isinstance(pretrainer.optimizer, keras.optimizers.LossScaleOptimizer)
    x = {**_inputs(batch=4), "masked_lm_positions": _positions(batch=4)}
    y = {
        "masked_lm_ids": np.ones((4, 4), np.int32),
        "masked_lm_weights": np.ones((4, 4), np.float32),
        "next_sentence_labels": np.zeros((4, 1), np.int32),
    }
    logs = pretrainer.fit(x, y, epochs=2, verbose=0).history
    assert np.isfinite(logs["loss"]).all() and logs["loss"][1] < logs["loss"][0]


def test_xla_matches_graph_mode():
    encoder = keras_bert.BertEncoder(TINY)
    reference.randomize_weights(encoder, seed=6)
    x = {k: tf.constant(v) for k, v in _inputs().items()}
    graph = tf.function(lambda t: encoder(t, training=False))(x)
    xla = tf.function(lambda t: encoder(t, training=False), jit_compile=True)(x)
    np.testing.assert_allclose(xla["sequence_output"], graph["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(xla["pooled_output"], graph["pooled_output"], atol=1e-5)


def test_pretrainer_trains_with_xla():
    # One layer: XLA compile time on CPU grows with depth, and one layer exercises every op.
    pretrainer = keras_bert.BertPretrainer(
        keras_bert.BertEncoder(TINY.replace(num_hidden_layers=1))
    )
    pretrainer.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=True)
    x = {**_inputs(batch=4), "masked_lm_positions": _positions(batch=4)}
    y = {
        "masked_lm_ids": np.full((4, 4), 7, np.int32),
        "masked_lm_weights": np.ones((4, 4), np.float32),
        "next_sentence_labels": np.ones((4, 1), np.int32),
    }
    logs = pretrainer.fit(x, y, epochs=5, verbose=0).history
    assert logs["loss"][-1] < logs["loss"][0]
    assert set(logs) >= {"loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"}


def test_any_length_without_retracing():
    """One traced function serves every sequence length up to max_position_embeddings."""
    encoder = keras_bert.BertEncoder(TINY)
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in INPUT_NAMES}
    fn = tf.function(
        lambda t: encoder(t, training=False)["sequence_output"], input_signature=[spec]
    )
    for seq in (1, 5, 24):
        x = _inputs(seq=seq, batch=2) if seq > 1 else {k: np.ones((2, 1), np.int32) for k in spec}
        assert fn(x).shape == (2, seq, TINY.hidden_size)
    assert fn.experimental_get_tracing_count() == 1


def test_too_long_sequence_is_a_clear_error():
    encoder = keras_bert.BertEncoder(TINY)
    x = {k: np.zeros((1, 25), np.int32) for k in INPUT_NAMES}
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings"):
        encoder(x)


@pytest.mark.parametrize(
    "key,value,limit",
    [
        ("input_word_ids", 83, "vocab_size"),
        ("input_word_ids", -1, "vocab_size"),
        ("input_type_ids", 2, "type_vocab_size"),
    ],
)
def test_out_of_range_ids_are_a_clear_error(key, value, limit):
    encoder = keras_bert.BertEncoder(TINY)
    x = _inputs()
    x[key] = x[key].copy()
    x[key][0, 1] = value
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{key}.*{limit}"):
        encoder(x)
    with pytest.raises(tf.errors.InvalidArgumentError, match=key):  # In graph mode too.
        tf.function(lambda t: encoder(t))(x)


def test_dropout_only_in_training():
    encoder = keras_bert.BertEncoder(TINY)
    x = _inputs()
    a, b = (
        encoder(x, training=False)["sequence_output"],
        encoder(x, training=False)["sequence_output"],
    )
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(encoder(x, training=True)["sequence_output"], a)


def test_evaluate_reports_the_mean_loss_on_datasets_of_unknown_length():
    """Keras ends a dataset of unknown length with an empty batch; it must not pull the means
    down."""
    pretrainer = keras_bert.BertPretrainer(
        keras_bert.BertEncoder(TINY.replace(num_hidden_layers=1))
    )
    pretrainer.compile(optimizer="adam")
    rng = np.random.default_rng(7)
    x = {**_inputs(batch=12, seed=7), "masked_lm_positions": _positions(batch=12)}
    y = {
        "masked_lm_ids": rng.integers(0, TINY.vocab_size, (12, 4)).astype(np.int32),
        "masked_lm_weights": np.ones((12, 4), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (12, 1)).astype(np.int32),
    }
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    known = pretrainer.evaluate(batches, verbose=0, return_dict=True)
    unknown = pretrainer.evaluate(batches.filter(lambda a, b: True), verbose=0, return_dict=True)
    logits = pretrainer.predict(x, verbose=0)
    want = keras_bert.models.pretrainer.pretraining_loss(
        y, logits
    )  # Equal-size batches: mean of means = mean.
    for result in (known, unknown):
        np.testing.assert_allclose(result["mlm_loss"], want["mlm_loss"], rtol=1e-5)
        np.testing.assert_allclose(result["nsp_loss"], want["nsp_loss"], rtol=1e-5)
