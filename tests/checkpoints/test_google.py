"""Original Google TF1 checkpoints: released names in, same names out, outputs against NumPy."""

import json
import os
import re

import numpy as np
import pytest
import reference
import tensorflow as tf
from checkpoint_cases import (
    assert_matches_reference,
    assert_same_outputs,
    assert_weights_equal,
    load_quietly,
    random_weights,
)

import keras_bert
from keras_bert import checkpoints

CONFIG = keras_bert.BertConfig(
    vocab_size=53,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=24,
)

# The test's own renaming (regex rules, independent of the library's table):
# Keras variable path -> released TF1 name.
_RULES = [
    (r"^embeddings/", "bert/embeddings/"),
    (r"^layer_(\d+)/(query|key|value)/", r"bert/encoder/layer_\1/attention/self/\2/"),
    (r"^layer_(\d+)/attention_output_dense/", r"bert/encoder/layer_\1/attention/output/dense/"),
    (
        r"^layer_(\d+)/attention_output_LayerNorm/",
        r"bert/encoder/layer_\1/attention/output/LayerNorm/",
    ),
    (r"^layer_(\d+)/intermediate_dense/", r"bert/encoder/layer_\1/intermediate/dense/"),
    (r"^layer_(\d+)/output_dense/", r"bert/encoder/layer_\1/output/dense/"),
    (r"^layer_(\d+)/output_LayerNorm/", r"bert/encoder/layer_\1/output/LayerNorm/"),
    (r"^pooler_dense/", "bert/pooler/dense/"),
    (r"^cls_predictions/transform_dense/", "cls/predictions/transform/dense/"),
    (r"^cls_predictions/transform_LayerNorm/", "cls/predictions/transform/LayerNorm/"),
    (r"^cls_predictions/output_bias$", "cls/predictions/output_bias"),
    (r"^cls_seq_relationship/kernel$", "cls/seq_relationship/output_weights"),
    (r"^cls_seq_relationship/bias$", "cls/seq_relationship/output_bias"),
]


def released_name(path):
    for pattern, replacement in _RULES:
        name, count = re.subn(pattern, replacement, path)
        if count:
            return name
    raise KeyError(path)


def write_released_checkpoint(directory, weights, extra=None, config=None, drop=(), reshape=None):
    """A TF1 checkpoint as the original code wrote it: tf.compat.v1 Saver, released names."""
    os.makedirs(directory, exist_ok=True)
    arrays = {}
    for path, value in weights.items():
        name = released_name(path)
        arrays[name] = (
            value.T if name.endswith("output_weights") else value
        )  # [2, H] in the original.
    arrays.update(extra or {})
    for name in drop:
        del arrays[name]
    if reshape:
        arrays[reshape] = np.zeros(
            arrays[reshape].shape[:-1] + (arrays[reshape].shape[-1] + 1,), "float32"
        )
    variables = {name: tf.Variable(value) for name, value in arrays.items()}
    tf.compat.v1.train.Saver(var_list=variables).save(
        None, os.path.join(directory, "bert_model.ckpt"), write_meta_graph=False, write_state=False
    )
    original_fields = {k: v for k, v in CONFIG.to_dict().items() if k != "layer_norm_eps"}
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(config or original_fields, f)
    return arrays


def test_canonical_names_are_the_keras_paths():
    from keras_bert.checkpoints import weights

    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(CONFIG))
    assert {name: v.path for name, v in weights.model_variables(model).items()} == {
        w.path: w.path for w in model.weights
    }


def test_released_pretraining_checkpoint_matches_numpy_reference(tmp_path):
    weights = random_weights(CONFIG)
    slots = {
        "global_step": np.int64(1000),
        "bert/pooler/dense/kernel/adam_m": np.zeros((32, 32), "float32"),
        "bert/pooler/dense/kernel/adam_v": np.zeros((32, 32), "float32"),
    }
    write_released_checkpoint(tmp_path, weights, extra=slots)
    model = load_quietly(checkpoints.load_pretrainer, str(tmp_path))  # Slots skipped silently.
    assert model.next_sentence_head is not None
    assert_weights_equal(model, weights)
    assert_matches_reference(model, weights)


def test_encoder_from_prefix_or_directory_skips_heads_silently(tmp_path):
    weights = random_weights(CONFIG)
    write_released_checkpoint(tmp_path, weights)
    encoder_weights = {k: v for k, v in weights.items() if not k.startswith("cls_")}
    for path in (tmp_path, tmp_path / "bert_model.ckpt", str(tmp_path / "bert_model.ckpt.index")):
        encoder = load_quietly(checkpoints.load_encoder, path)
        assert_weights_equal(encoder, encoder_weights)
    assert_matches_reference(encoder, encoder_weights)


@pytest.mark.parametrize("next_sentence", [True, False])
def test_pretrainer_round_trip_uses_released_names(tmp_path, next_sentence):
    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(CONFIG), next_sentence=next_sentence)
    reference.randomize_weights(model, seed=5)
    vocab = [f"tok{i}" for i in range(CONFIG.vocab_size)]
    checkpoints.save(model, tmp_path / "out", format="google", vocab=vocab)
    assert sorted(os.listdir(tmp_path)) == ["out"]  # No temporary directory left behind.

    reader = tf.train.load_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    expected = {
        released_name(w.path): list(w.shape)[::-1]
        if w.path == "cls_seq_relationship/kernel"
        else list(w.shape)
        for w in model.weights
    }
    assert shapes == expected
    if next_sentence:
        assert shapes["cls/seq_relationship/output_weights"] == [2, CONFIG.hidden_size]
    assert (tmp_path / "out" / "vocab.txt").read_text().splitlines() == vocab
    assert checkpoints.vocab_path(tmp_path / "out" / "bert_model.ckpt") == str(
        tmp_path / "out" / "vocab.txt"
    )
    assert keras_bert.BertConfig.from_json_file(tmp_path / "out" / "bert_config.json") == CONFIG

    loaded = checkpoints.load_pretrainer(tmp_path / "out")
    assert (loaded.next_sentence_head is not None) == next_sentence
    assert_weights_equal(loaded, {w.path: w.numpy() for w in model.weights})
    assert_same_outputs(model, loaded)


def test_encoder_round_trip_writes_only_bert_variables(tmp_path):
    encoder = keras_bert.BertEncoder(CONFIG)
    reference.randomize_weights(encoder, seed=7)
    checkpoints.save(encoder, tmp_path, format="google")
    names = tf.train.load_checkpoint(str(tmp_path / "bert_model.ckpt")).get_variable_to_shape_map()
    assert all(n.startswith("bert/") for n in names) and len(names) == len(encoder.weights)
    assert_same_outputs(encoder, checkpoints.load_encoder(tmp_path))
    assert checkpoints.vocab_path(tmp_path) is None
    mixed = checkpoints.load_encoder(tmp_path, dtype="mixed_bfloat16")
    assert mixed.transformer_layers[0].compute_dtype == "bfloat16"
    assert_weights_equal(
        mixed, {w.path: w.numpy() for w in encoder.weights}
    )  # Variables stay float32.
    with pytest.raises(
        checkpoints.CheckpointError, match="no pre-training heads; load it with load_encoder"
    ):
        checkpoints.load_pretrainer(tmp_path)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoints.load_encoder(tmp_path / "nowhere")
    write_released_checkpoint(tmp_path / "a", random_weights(CONFIG, heads=False))
    os.remove(tmp_path / "a" / "bert_config.json")
    with pytest.raises(FileNotFoundError, match=r"a/bert_config\.json"):
        checkpoints.load_encoder(tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "bert_config.json").write_text(json.dumps(CONFIG.to_dict()))
    with pytest.raises(FileNotFoundError, match=r"b/bert_model\.ckpt\.index"):
        checkpoints.load_encoder(tmp_path / "b", format="google")


def test_missing_variable_and_shape_mismatch_are_named(tmp_path):
    weights = random_weights(CONFIG, heads=False)
    write_released_checkpoint(
        tmp_path / "a", weights, drop=["bert/encoder/layer_1/attention/self/key/bias"]
    )
    with pytest.raises(
        checkpoints.CheckpointError,
        match="missing variables bert/encoder/layer_1/attention/self/key/bias",
    ):
        checkpoints.load_encoder(tmp_path / "a")
    write_released_checkpoint(
        tmp_path / "b", weights, reshape="bert/embeddings/position_embeddings"
    )
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"bert/embeddings/position_embeddings: expected shape \[24, 32\], found \[24, 33\]",
    ):
        checkpoints.load_encoder(tmp_path / "b")
    # A config that disagrees with the file shows up as a shape mismatch, named.
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"word_embeddings: expected shape \[60, 32\], found \[53, 32\]",
    ):
        checkpoints.load_encoder(tmp_path / "a", config=CONFIG.replace(vocab_size=60))


def test_bad_config_and_extra_variables(tmp_path):
    weights = random_weights(CONFIG, heads=False)
    write_released_checkpoint(
        tmp_path / "a", weights, config={**CONFIG.to_dict(), "hidden_sizes": 3}
    )
    with pytest.raises(ValueError, match=r"bert_config\.json.*hidden_sizes"):
        checkpoints.load_encoder(tmp_path / "a")
    write_released_checkpoint(
        tmp_path / "b", weights, config={**CONFIG.to_dict(), "num_attention_heads": 5}
    )
    with pytest.raises(ValueError, match=r"bert_config\.json.*divisible"):
        checkpoints.load_encoder(tmp_path / "b")
    write_released_checkpoint(
        tmp_path / "c", weights, extra={"bert/encoder/layer_9/extra": np.ones(3, "float32")}
    )
    with pytest.warns(UserWarning, match="not used by the model: bert/encoder/layer_9/extra"):
        checkpoints.load_encoder(tmp_path / "c")


def test_save_refuses_to_clobber_and_is_atomic(tmp_path):
    encoder = keras_bert.BertEncoder(CONFIG)
    (tmp_path / "keep.txt").write_text("mine")
    checkpoints.save(
        encoder, tmp_path, format="google"
    )  # Into an existing directory; other files kept.
    assert (tmp_path / "keep.txt").read_text() == "mine"
    with pytest.raises(FileExistsError, match="overwrite=True"):
        checkpoints.save(encoder, tmp_path, format="google")
    reference.randomize_weights(encoder, seed=9)
    checkpoints.save(encoder, tmp_path, format="google", overwrite=True)
    reloaded = checkpoints.load_encoder(tmp_path)
    np.testing.assert_array_equal(reloaded.pooler.kernel.numpy(), encoder.pooler.kernel.numpy())
    with pytest.raises(ValueError, match="3 tokens but the model's vocab_size is 53"):
        checkpoints.save(encoder, tmp_path / "new", format="google", vocab=["a", "b", "c"])
    assert not (tmp_path / "new").exists()
    assert sorted(os.listdir(tmp_path)) == sorted(
        [
            "keep.txt",
            "bert_config.json",
            "bert_model.ckpt.index",
            "bert_model.ckpt.data-00000-of-00001",
        ]
    )
    with pytest.raises(TypeError, match="BertEncoder or BertPretrainer"):
        checkpoints.save(object(), tmp_path / "x", format="google")
    with pytest.raises(ValueError, match="Unknown checkpoint format"):
        checkpoints.save(encoder, tmp_path / "x", format="onnx")


def test_training_directory_with_several_checkpoints(tmp_path):
    """Like run_pretraining.py's output: model.ckpt-N files and a `checkpoint` state file."""
    first, second = random_weights(CONFIG, seed=1), random_weights(CONFIG, seed=2)
    for step, weights in ((10, first), (20, second)):
        variables = {
            released_name(k): tf.Variable(v.T if k == "cls_seq_relationship/kernel" else v)
            for k, v in weights.items()
        }
        tf.compat.v1.train.Saver(var_list=variables).save(
            None, str(tmp_path / "model.ckpt"), global_step=step, write_meta_graph=False
        )
    (tmp_path / "bert_config.json").write_text(json.dumps(CONFIG.to_dict()))
    assert_weights_equal(
        checkpoints.load_pretrainer(tmp_path), second
    )  # The latest, as the state file says.
    assert_weights_equal(checkpoints.load_pretrainer(tmp_path / "model.ckpt-10"), first)
    os.remove(tmp_path / "checkpoint")
    with pytest.raises(FileNotFoundError, match="found 2 \\*.index files"):
        checkpoints.load_pretrainer(tmp_path)


@pytest.mark.slow
def test_base_size_round_trip_through_both_formats(tmp_path):
    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(keras_bert.BertConfig.preset("base")))
    checkpoints.save(model, tmp_path / "google", format="google")
    checkpoints.save(
        checkpoints.load_pretrainer(tmp_path / "google"), tmp_path / "hf", format="huggingface"
    )
    assert_weights_equal(
        checkpoints.load_pretrainer(tmp_path / "hf"), {w.path: w.numpy() for w in model.weights}
    )
