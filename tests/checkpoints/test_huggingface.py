"""Hugging Face BERT directories: real key names in (bare and "bert."-prefixed), both out."""

import json
import os
import re

import numpy as np
import pytest
import reference
import safetensors.numpy
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
    vocab_size=47,
    hidden_size=24,
    num_hidden_layers=2,
    num_attention_heads=3,
    intermediate_size=40,
    max_position_embeddings=20,
)

# The test's own renaming (regex rules, independent of the library's table):
# Keras variable path -> (transformers key, transposed). Linear weights are [out, in].
_RULES = [
    (r"^embeddings/(\w+_embeddings)$", r"embeddings.\1.weight"),
    (r"^embeddings/LayerNorm/", "embeddings.LayerNorm/"),
    (r"^layer_(\d+)/(query|key|value)/", r"encoder.layer.\1.attention.self.\2/"),
    (r"^layer_(\d+)/attention_output_dense/", r"encoder.layer.\1.attention.output.dense/"),
    (r"^layer_(\d+)/attention_output_LayerNorm/", r"encoder.layer.\1.attention.output.LayerNorm/"),
    (r"^layer_(\d+)/intermediate_dense/", r"encoder.layer.\1.intermediate.dense/"),
    (r"^layer_(\d+)/output_dense/", r"encoder.layer.\1.output.dense/"),
    (r"^layer_(\d+)/output_LayerNorm/", r"encoder.layer.\1.output.LayerNorm/"),
    (r"^pooler_dense/", "pooler.dense/"),
    (r"^cls_predictions/transform_dense/", "cls.predictions.transform.dense/"),
    (r"^cls_predictions/transform_LayerNorm/", "cls.predictions.transform.LayerNorm/"),
    (r"^cls_predictions/output_bias$", "cls.predictions.bias"),
    (r"^cls_seq_relationship/", "cls.seq_relationship/"),
]
_LEAVES = {
    "kernel": ("weight", True),
    "bias": ("bias", False),
    "gamma": ("weight", False),
    "beta": ("bias", False),
}


def hf_key(path, prefix="", old_layer_norm=False):
    for pattern, replacement in _RULES:
        name, count = re.subn(pattern, replacement, path)
        if count:
            break
    else:
        raise KeyError(path)
    transposed = False
    if "/" in name:
        module, leaf = name.split("/")
        if old_layer_norm and leaf in ("gamma", "beta"):
            name = f"{module}.{leaf}"
        else:
            name, transposed = f"{module}.{_LEAVES[leaf][0]}", _LEAVES[leaf][1]
    return (name if name.startswith("cls.") else prefix + name), transposed


def to_hf(weights, prefix="", old_layer_norm=False):
    tensors = {}
    for path, value in weights.items():
        key, transposed = hf_key(path, prefix, old_layer_norm)
        tensors[key] = np.ascontiguousarray(value.T if transposed else value)
    return tensors


def write_hf_dir(directory, tensors, config=None):
    os.makedirs(directory, exist_ok=True)
    safetensors.numpy.save_file(
        tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"}
    )
    hf_config = {
        "model_type": "bert",
        "architectures": ["BertForPreTraining"],
        "pad_token_id": 0,
        "layer_norm_eps": 1e-12,
        **{k: v for k, v in CONFIG.to_dict().items() if k != "layer_norm_eps"},
    }
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config or hf_config, f)


def test_bare_bert_model_matches_numpy_reference(tmp_path):
    weights = random_weights(CONFIG, heads=False)
    tensors = to_hf(weights)
    tensors["embeddings.position_ids"] = np.arange(CONFIG.max_position_embeddings)[
        None
    ]  # Old buffer.
    write_hf_dir(tmp_path, tensors)
    encoder = load_quietly(checkpoints.load_encoder, tmp_path)
    assert_weights_equal(encoder, weights)
    assert_matches_reference(encoder, weights)


@pytest.mark.parametrize("old_layer_norm", [False, True])
def test_bert_for_pretraining_with_tied_decoder(tmp_path, old_layer_norm):
    weights = random_weights(CONFIG)
    tensors = to_hf(weights, prefix="bert.", old_layer_norm=old_layer_norm)
    assert ("bert.embeddings.LayerNorm.gamma" in tensors) == old_layer_norm
    tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"]
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]
    write_hf_dir(tmp_path, tensors)
    model = load_quietly(checkpoints.load_pretrainer, tmp_path)
    assert_weights_equal(model, weights)
    assert_matches_reference(model, weights)
    # The encoder alone from the same file ignores the heads without a warning.
    encoder = load_quietly(checkpoints.load_encoder, tmp_path)
    assert_weights_equal(encoder, {k: v for k, v in weights.items() if not k.startswith("cls_")})


def test_masked_lm_without_nsp_or_pooler_and_untied_decoder(tmp_path):
    weights = random_weights(CONFIG, next_sentence=False)
    tensors = to_hf(weights, prefix="bert.")
    del (
        tensors["bert.pooler.dense.weight"],
        tensors["bert.pooler.dense.bias"],
    )  # As BertForMaskedLM saves.
    write_hf_dir(tmp_path / "mlm", tensors)
    with pytest.warns(
        UserWarning, match="no pooler.dense.weight, pooler.dense.bias; these keep their random"
    ):
        model = checkpoints.load_pretrainer(tmp_path / "mlm")
    assert model.next_sentence_head is None
    pooler = {w.path: w.numpy() for w in model.encoder.pooler.weights}
    assert_weights_equal(model, {**weights, **pooler})
    assert_matches_reference(model, weights)  # MLM logits do not use the pooler.
    with pytest.raises(
        checkpoints.CheckpointError, match="missing variables cls.seq_relationship.weight"
    ):
        checkpoints.load_pretrainer(tmp_path / "mlm", next_sentence=True)
    tensors["cls.predictions.decoder.weight"] = (
        tensors["bert.embeddings.word_embeddings.weight"] + 1.0
    )
    write_hf_dir(tmp_path / "untied", tensors)
    with pytest.raises(checkpoints.CheckpointError, match="cls.predictions.decoder.weight differs"):
        checkpoints.load_pretrainer(tmp_path / "untied")


def test_pickle_is_refused_by_default(tmp_path):
    write_hf_dir(tmp_path, {})
    os.remove(tmp_path / "model.safetensors")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not really a pickle")
    with pytest.raises(ValueError, match=r"pytorch_model\.bin, a pickle.*allow_pickle=True"):
        checkpoints.load_encoder(tmp_path)
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs PyTorch"):
            checkpoints.load_encoder(tmp_path, allow_pickle=True)


def test_missing_files_bad_shapes_and_bad_config_are_named(tmp_path):
    tensors = to_hf(random_weights(CONFIG, heads=False))
    write_hf_dir(tmp_path / "a", tensors)
    os.remove(tmp_path / "a" / "model.safetensors")
    with pytest.raises(FileNotFoundError, match=r"No model\.safetensors .* in .*a"):
        checkpoints.load_encoder(tmp_path / "a")
    write_hf_dir(tmp_path / "b", tensors)
    os.remove(tmp_path / "b" / "config.json")
    with pytest.raises(FileNotFoundError, match=r"b/config\.json"):
        checkpoints.load_encoder(tmp_path / "b")
    bad = dict(
        tensors, **{"encoder.layer.1.intermediate.dense.weight": np.zeros((24, 40), "float32")}
    )
    del bad["encoder.layer.0.output.LayerNorm.bias"]
    write_hf_dir(tmp_path / "c", bad)
    with pytest.raises(checkpoints.CheckpointError) as error:
        checkpoints.load_encoder(tmp_path / "c")
    message = str(error.value)
    assert (
        "model.safetensors" in message
        and "missing variables encoder.layer.0.output.LayerNorm.bias" in message
    )
    assert (
        "encoder.layer.1.intermediate.dense.weight: expected shape [40, 24], found [24, 40]"
        in message
    )
    write_hf_dir(tmp_path / "d", tensors, config={"model_type": "roberta", **CONFIG.to_dict()})
    with pytest.raises(ValueError, match=r"d/config\.json.*model_type 'roberta'"):
        checkpoints.load_encoder(tmp_path / "d")
    write_hf_dir(
        tmp_path / "e", dict(tensors, **{"classifier.weight": np.zeros((2, 24), "float32")})
    )
    with pytest.warns(UserWarning, match="not used by the model: classifier.weight"):
        checkpoints.load_encoder(tmp_path / "e")


def test_sharded_safetensors(tmp_path):
    weights = random_weights(CONFIG, heads=False)
    tensors = to_hf(weights)
    keys = sorted(tensors)
    shards = {
        "model-00001-of-00002.safetensors": keys[::2],
        "model-00002-of-00002.safetensors": keys[1::2],
    }
    for name, shard_keys in shards.items():
        safetensors.numpy.save_file({k: tensors[k] for k in shard_keys}, str(tmp_path / name))
    index = {"weight_map": {k: name for name, shard_keys in shards.items() for k in shard_keys}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", **CONFIG.to_dict()}))
    assert_weights_equal(checkpoints.load_encoder(tmp_path), weights)


@pytest.mark.parametrize("heads", [True, False])
def test_round_trip_uses_transformers_key_names(tmp_path, heads):
    encoder = keras_bert.BertEncoder(CONFIG)
    model = keras_bert.BertPretrainer(encoder) if heads else encoder
    reference.randomize_weights(model, seed=11)
    weights = {w.path: w.numpy() for w in model.weights}
    checkpoints.save(
        model, tmp_path / "out", format="huggingface", vocab=[f"w{i}" for i in range(47)]
    )
    stored = safetensors.numpy.load_file(str(tmp_path / "out" / "model.safetensors"))
    want = to_hf(weights, prefix="bert." if heads else "")
    assert sorted(stored) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(stored[key], want[key], err_msg=key)
    hf_config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert hf_config["model_type"] == "bert" and hf_config["hidden_size"] == 24
    assert hf_config["architectures"] == ["BertForPreTraining" if heads else "BertModel"]
    assert keras_bert.BertConfig.from_hf_dict(hf_config) == CONFIG

    loaded = (checkpoints.load_pretrainer if heads else checkpoints.load_encoder)(tmp_path / "out")
    assert_weights_equal(loaded, weights)
    assert_same_outputs(model, loaded)


def test_google_to_huggingface_conversion(tmp_path):
    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(CONFIG))
    reference.randomize_weights(model, seed=13)
    checkpoints.save(model, tmp_path / "google", format="google")
    checkpoints.save(
        checkpoints.load_pretrainer(tmp_path / "google"), tmp_path / "hf", format="huggingface"
    )
    assert_weights_equal(
        checkpoints.load_pretrainer(tmp_path / "hf"), {w.path: w.numpy() for w in model.weights}
    )
