"""The rewritten copy of the encoder (`keras_bert.rewrites.encoder`): outside every scope it
computes the encoder, sharing its weights; its blocks run the core block's forward pass, whose
public steps a copy substitutes; inside `quantization_aware()` a site follows each int8 tensor,
its range taken per example."""

import keras
import numpy as np
import tensorflow as tf
from finetune_cases import TINY

import keras_bert
from keras_bert.layers.transformer import TransformerBlock
from keras_bert.models.task_models import BertClassifier
from keras_bert.rewrites import encoder as rewrite
from keras_bert.rewrites import fake_quant

LAYER_NORM_SITES = ("mean", "squares", "variance", "rsqrt", "inv", "centered", "scaled", "output")


def _encoder(seed=3):
    keras.utils.set_random_seed(seed)
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**dict(TINY, num_hidden_layers=2)))
    rng = np.random.default_rng(1)
    for weight in encoder.weights:  # Non-trivial LayerNorm parameters.
        if "LayerNorm" in weight.path:
            weight.assign(rng.normal(1.0, 0.5, weight.shape))
    return encoder


def _inputs():
    rng = np.random.default_rng(0)
    return {
        "input_word_ids": tf.constant(rng.integers(0, TINY["vocab_size"], (3, 12)), tf.int32),
        "input_mask": tf.constant([[1] * 12, [1] * 7 + [0] * 5, [1] * 3 + [0] * 9], tf.int32),
        "input_type_ids": tf.constant(rng.integers(0, 2, (3, 12)), tf.int32),
    }


def test_the_copy_computes_the_encoder_with_its_weights():
    encoder, inputs = _encoder(), _inputs()
    want = encoder(inputs)
    copy = rewrite.substitute_encoder(encoder, rewrite.EncoderRewrite)
    for got in (copy(inputs), tf.function(copy)(inputs)):
        for name in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(got[name], want[name], atol=1e-5)
        for got_layer, want_layer in zip(got["encoder_outputs"], want["encoder_outputs"]):
            np.testing.assert_allclose(got_layer, want_layer, atol=1e-5)
    assert {id(w) for w in copy.weights} == {id(w) for w in encoder.weights}  # None of its own.
    assert all(type(block) is rewrite.BlockRewrite for block in copy.blocks)

    model = BertClassifier(encoder, num_classes=3)
    twin = rewrite.substitute_encoder(model, rewrite.EncoderRewrite)
    np.testing.assert_allclose(twin(inputs)["logits"], model(inputs)["logits"], atol=1e-5)
    assert {id(w) for w in twin.weights} == {id(w) for w in model.weights}


def test_the_core_block_runs_its_public_steps():
    """`TransformerBlock.call` applies the block's `activation` attribute: a block given relu
    there computes what a relu block with the same weights computes (and the gelu block differs)."""
    keras.utils.set_random_seed(0)
    x = tf.random.normal((2, 5, 32))
    gelu = TransformerBlock(num_attention_heads=2, intermediate_size=64, hidden_act="gelu")
    relu = TransformerBlock(num_attention_heads=2, intermediate_size=64, hidden_act="relu")
    gelu.build(x.shape)
    relu.build(x.shape)
    relu.set_weights(gelu.get_weights())
    before = gelu(x).numpy()
    assert not np.allclose(before, relu(x), atol=1e-4)
    gelu.activation = keras.activations.relu
    np.testing.assert_allclose(gelu(x), relu(x), atol=1e-6)
    assert rewrite.BlockRewrite.call is TransformerBlock.call  # The copy keeps the forward pass.


def _per_example_range(x, batch):
    rows = np.reshape(np.asarray(x, np.float64), [batch, -1])
    return rows.min(1).mean(), rows.max(1).mean()


def test_sites_follow_the_int8_tensors_and_take_ranges_per_example():
    encoder, inputs = _encoder(), _inputs()
    copy = rewrite.EncoderRewrite(encoder)
    ranges = fake_quant.ActivationRanges()
    with fake_quant.quantization_aware(ranges, "initialize"):
        initialized = copy(inputs)
    block_sites = [
        "query",
        "query_scaled",
        "key",
        "scores",
        "value",
        "context",
        "attention_output",
        "attention_residual",
        *(f"attention_output_LayerNorm/{s}" for s in LAYER_NORM_SITES),
        "intermediate",
        "activation",
        "output_dense",
        "output_residual",
        *(f"output_LayerNorm/{s}" for s in LAYER_NORM_SITES),
    ]
    embedding_sites = ["words_types", "sum", *(f"LayerNorm/{s}" for s in LAYER_NORM_SITES)]
    assert list(ranges.sites) == [f"embeddings/{s}" for s in embedding_sites] + [
        f"layer_{i}/{s}" for i in range(2) for s in block_sites
    ]
    want = encoder(inputs)  # Observing leaves the float values.
    np.testing.assert_allclose(initialized["sequence_output"], want["sequence_output"], atol=1e-5)
    # A block's output is its last LayerNorm site; the embeddings' first site the tables' sum.
    for name, value in (
        ("layer_1/output_LayerNorm/output", want["encoder_outputs"][1]),
        ("layer_0/output_LayerNorm/output", want["encoder_outputs"][0]),
        (
            "embeddings/words_types",
            tf.gather(encoder.embeddings.word_embeddings, inputs["input_word_ids"])
            + tf.gather(encoder.embeddings.token_type_embeddings, inputs["input_type_ids"]),
        ),
    ):
        got = [float(v.numpy()) for v in ranges.sites[name]]
        np.testing.assert_allclose(got, _per_example_range(value, 3), rtol=1e-5, err_msg=name)
    with fake_quant.quantization_aware(ranges):
        quantized = copy(inputs)["sequence_output"].numpy()
    error = np.abs(quantized - want["sequence_output"])
    print(f"fake-quantized outputs: mean |error| {error.mean():.4f}, max {error.max():.4f}")
    assert error.max() > 1e-4  # Rounded ...
    assert error.mean() < 0.1  # ... only: a few steps of the outputs' grid (about 0.03).
