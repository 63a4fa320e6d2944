"""Parity of BertEncoder / BertPretrainer with keras-hub and tf-models-official given the same
weights.

Weights are copied from our (randomized) model into the reference: attention kernels
reshaped to the references' per-head layout ([H, N, D], [N, D], [N, D, H]). Inference
mode (dropout off), padded batches. keras-hub's BertBackbone uses the tanh GELU: it is
compared as shipped against our "gelu_tanh", and with its activation set to the exact
(erf) GELU against our default "gelu". tf-models-official is built with the erf GELU.
"""

import keras_hub
import numpy as np
import pytest
import reference
import tensorflow as tf

import keras_bert
from keras_bert.testing.keras_hub_weights import (
    copy_to_keras_hub,
    copy_weights,
    keras_hub_inputs,
    per_head_arrays,
)

CONFIGS = {
    "L2_H32_A4": keras_bert.BertConfig(
        vocab_size=71,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
    ),
    "L3_H48_A3_types3": keras_bert.BertConfig(
        vocab_size=50,
        hidden_size=48,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=80,
        max_position_embeddings=30,
        type_vocab_size=3,
    ),
    "mini": keras_bert.BertConfig.preset("mini", vocab_size=120, max_position_embeddings=64),
}
ATOL = 1e-5
# Random weights at 5x BERT's init scale: large enough that no term hides, small enough that float32
# round-off stays under ATOL (at 0.2 the two references already differ from each other by 5e-5).
SCALE = 0.1


def our_encoder(config, seed=0):
    encoder = keras_bert.BertEncoder(config)
    reference.randomize_weights(encoder, seed=seed, scale=SCALE)
    return encoder


def padded_inputs(config, seed=1, batch=4, seq=13):
    inputs = reference.random_inputs(np.random.default_rng(seed), config, batch=batch, seq=seq)
    assert inputs["input_mask"].min() == 0  # The batch has padding.
    return inputs


# === keras-hub ===


def hub_backbone(encoder, exact_gelu):
    config = encoder.config
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
    )
    return copy_to_keras_hub(encoder, backbone, exact_gelu=exact_gelu)


@pytest.mark.parametrize(
    "name, hidden_act",
    [
        ("L2_H32_A4", "gelu"),
        ("L2_H32_A4", "gelu_tanh"),
        ("L3_H48_A3_types3", "gelu"),
        ("L3_H48_A3_types3", "gelu_tanh"),
        ("mini", "gelu"),
    ],
)
def test_encoder_matches_keras_hub_backbone(name, hidden_act):
    encoder = our_encoder(CONFIGS[name].replace(hidden_act=hidden_act))
    backbone = hub_backbone(encoder, exact_gelu=hidden_act == "gelu")
    inputs = padded_inputs(encoder.config)
    ours = encoder(inputs)
    theirs = backbone(keras_hub_inputs(inputs))
    np.testing.assert_allclose(ours["sequence_output"], theirs["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=ATOL)


def test_activation_mismatch_is_detected():
    """The parity check can fail: erf GELU against keras-hub's tanh GELU differs beyond
    tolerance."""
    encoder = our_encoder(CONFIGS["L2_H32_A4"])
    backbone = hub_backbone(encoder, exact_gelu=False)
    inputs = padded_inputs(encoder.config)
    diff = np.abs(
        encoder(inputs)["sequence_output"] - backbone(keras_hub_inputs(inputs))["sequence_output"]
    ).max()
    assert diff > 10 * ATOL


def test_pretrainer_mlm_logits_match_keras_hub_masked_lm():
    config = CONFIGS["L2_H32_A4"]
    pretrainer = keras_bert.BertPretrainer(keras_bert.BertEncoder(config))
    reference.randomize_weights(pretrainer, seed=2, scale=SCALE)
    backbone = hub_backbone(pretrainer.encoder, exact_gelu=True)
    masked_lm = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
    head = masked_lm.masked_lm_head
    head._intermediate_layer_norm.epsilon = (
        config.layer_norm_eps
    )  # BertMaskedLM uses 1e-5; BERT 1e-12.
    head_arrays = {
        w.path: w.numpy()
        for w in pretrainer.masked_lm_head.weights
        if w.path.startswith("cls_predictions/")
    }
    head_variables = {
        w.path: w for w in head.weights if w.path.startswith("mlm_head/")
    }  # Not the tied table.
    copy_weights(
        head_arrays,
        head_variables,
        {
            "cls_predictions/transform_dense": "mlm_head/intermediate_dense",
            "cls_predictions/transform_LayerNorm": "mlm_head/intermediate_layer_norm",
            "cls_predictions/output_bias": "mlm_head/output_bias",
        },
    )
    inputs = padded_inputs(config)
    positions = np.random.default_rng(3).integers(0, 13, size=(4, 5)).astype(np.int32)
    ours = pretrainer({**inputs, "masked_lm_positions": positions})["mlm_logits"]
    theirs = masked_lm({**keras_hub_inputs(inputs), "mask_positions": positions})
    np.testing.assert_allclose(ours, theirs, atol=ATOL)


# === tf-models-official (Keras 2 / tf_keras) ===

TF_MODELS_NAMES = {
    "embeddings/word_embeddings": "word_embeddings/embeddings",
    "embeddings/position_embeddings": "position_embedding/embeddings",
    "embeddings/token_type_embeddings": "type_embeddings/embeddings",
    "embeddings/LayerNorm": "embeddings/layer_norm",
    "layer_{i}/query": "transformer/layer_{i}/self_attention/query",
    "layer_{i}/key": "transformer/layer_{i}/self_attention/key",
    "layer_{i}/value": "transformer/layer_{i}/self_attention/value",
    "layer_{i}/attention_output_dense": "transformer/layer_{i}/self_attention/attention_output",
    "layer_{i}/attention_output_LayerNorm": "transformer/layer_{i}/self_attention_layer_norm",
    "layer_{i}/intermediate_dense": "transformer/layer_{i}/intermediate",
    "layer_{i}/output_dense": "transformer/layer_{i}/output",
    "layer_{i}/output_LayerNorm": "transformer/layer_{i}/output_layer_norm",
    "pooler_dense": "pooler_transform",
}


def tf_models_encoder(encoder):
    import tf_keras
    from official.nlp.modeling import networks

    tf_keras.backend.clear_session()  # Deterministic variable names.
    config = encoder.config
    network = networks.BertEncoder(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        inner_dim=config.intermediate_size,
        inner_activation=lambda x: tf_keras.activations.gelu(x, approximate=False),
        output_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob,
        dict_outputs=True,
    )
    copy_weights(
        per_head_arrays(encoder),
        {w.name.removesuffix(":0"): w for w in network.weights},
        TF_MODELS_NAMES,
    )
    return network


@pytest.mark.parametrize("name", ["L2_H32_A4", "L3_H48_A3_types3", "mini"])
def test_encoder_matches_tf_models_official(name):
    encoder = our_encoder(CONFIGS[name], seed=4)
    network = tf_models_encoder(encoder)
    inputs = padded_inputs(encoder.config, seed=5)
    ours = encoder(inputs)
    theirs = network({k: tf.constant(v) for k, v in inputs.items()}, training=False)
    np.testing.assert_allclose(ours["sequence_output"], theirs["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=ATOL)
    assert len(theirs["encoder_outputs"]) == len(ours["encoder_outputs"])
    for mine, other in zip(ours["encoder_outputs"], theirs["encoder_outputs"]):
        np.testing.assert_allclose(mine, other, atol=ATOL)
