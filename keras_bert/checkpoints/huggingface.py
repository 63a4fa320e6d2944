"""Hugging Face BERT directories: config.json + model.safetensors (and vocab.txt).

Reads the bare `BertModel` key names (`embeddings.word_embeddings.weight`, ...) and the
"bert."-prefixed `BertForPreTraining` / `BertForMaskedLM` names with their `cls.*` heads,
including old-style `LayerNorm.gamma` / `LayerNorm.beta`. Files without a pooler
(BertForMaskedLM) load with a warning, the pooler keeping its random initial values.
Linear weights are stored [out, in], the transpose of a Keras kernel. The MLM decoder is
tied to the word embeddings: a stored `cls.predictions.decoder.weight` must equal them.

Writes a `BertEncoder` with the bare `BertModel` names (architectures ["BertModel"]) and a
`BertPretrainer` with the `BertForPreTraining` names (tied decoder weights left out, as
`save_pretrained` does). Never unpickles `pytorch_model.bin` unless `allow_pickle=True`.
"""

import json
import os

import numpy as np
import safetensors
import safetensors.numpy

from keras_bert.checkpoints import files, weights
from keras_bert.config import BertConfig
from keras_bert.errors import CheckpointError
from keras_bert.io_utils import atomic_files
from keras_bert.text.vocab import load_vocabulary, write_vocabulary

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
PICKLE_NAME = "pytorch_model.bin"
PICKLE_INDEX_NAME = "pytorch_model.bin.index.json"
VOCAB_NAME = files.VOCAB_NAME
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
TOKENIZER_JSON = "tokenizer.json"  # transformers v5 writes it without vocab.txt.
PREFIX = "bert."

_DENSE = (("kernel", "weight", True), ("bias", "bias", False))
_NORM = (("gamma", "weight", False), ("beta", "bias", False))
_LAYER = "encoder.layer.{i}."

# The one table for this format: (our canonical name, BertModel / cls.* key, transpose).
# Keys not starting with "cls." take the "bert." prefix in BertForPreTraining files.
HF_NAMES = (
    ("embeddings/word_embeddings", "embeddings.word_embeddings.weight", False),
    ("embeddings/token_type_embeddings", "embeddings.token_type_embeddings.weight", False),
    ("embeddings/position_embeddings", "embeddings.position_embeddings.weight", False),
    *weights.rows("embeddings/LayerNorm", "embeddings.LayerNorm.", _NORM),
    *weights.rows("layer_{i}/query", _LAYER + "attention.self.query.", _DENSE),
    *weights.rows("layer_{i}/key", _LAYER + "attention.self.key.", _DENSE),
    *weights.rows("layer_{i}/value", _LAYER + "attention.self.value.", _DENSE),
    *weights.rows("layer_{i}/attention_output_dense", _LAYER + "attention.output.dense.", _DENSE),
    *weights.rows(
        "layer_{i}/attention_output_LayerNorm", _LAYER + "attention.output.LayerNorm.", _NORM
    ),
    *weights.rows("layer_{i}/intermediate_dense", _LAYER + "intermediate.dense.", _DENSE),
    *weights.rows("layer_{i}/output_dense", _LAYER + "output.dense.", _DENSE),
    *weights.rows("layer_{i}/output_LayerNorm", _LAYER + "output.LayerNorm.", _NORM),
    *weights.rows("pooler_dense", "pooler.dense.", _DENSE),
    *weights.rows("cls_predictions/transform_dense", "cls.predictions.transform.dense.", _DENSE),
    *weights.rows(
        "cls_predictions/transform_LayerNorm", "cls.predictions.transform.LayerNorm.", _NORM
    ),
    ("cls_predictions/output_bias", "cls.predictions.bias", False),
    *weights.rows("cls_seq_relationship", "cls.seq_relationship.", _DENSE),
)
NSP_KEY = "cls.seq_relationship.weight"
WORD_EMBEDDINGS_KEY = "embeddings.word_embeddings.weight"
DECODER_WEIGHT_KEY = "cls.predictions.decoder.weight"  # Tied to the word embeddings.
DECODER_BIAS_KEY = "cls.predictions.decoder.bias"  # Tied to cls.predictions.bias.
POOLER_KEYS = ("pooler.dense.weight", "pooler.dense.bias")  # Absent from BertForMaskedLM files.
_BUFFERS = ("embeddings.position_ids",)  # Non-weight buffers in older files.


def detect(path):
    """True for a directory with config.json or weights in a Hugging Face layout."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path.endswith(".safetensors")
    return any(
        os.path.isfile(os.path.join(path, n))
        for n in (CONFIG_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME, PICKLE_NAME, PICKLE_INDEX_NAME)
    )


def read_tensors(directory, allow_pickle=False):
    """(dict key -> NumPy array with old LayerNorm names normalized, source file name)."""
    safe_index = os.path.join(directory, WEIGHTS_INDEX_NAME)
    pickle_index = os.path.join(directory, PICKLE_INDEX_NAME)
    if os.path.isfile(os.path.join(directory, WEIGHTS_NAME)):
        paths, loader = [os.path.join(directory, WEIGHTS_NAME)], _load_safetensors
    elif os.path.isfile(safe_index):
        paths, loader = _shards(safe_index), _load_safetensors
    elif os.path.isfile(os.path.join(directory, PICKLE_NAME)) or os.path.isfile(pickle_index):
        single = os.path.join(directory, PICKLE_NAME)
        source = single if os.path.isfile(single) else pickle_index
        if not allow_pickle:
            raise ValueError(
                f"{directory} has only {os.path.basename(source)}, a pickle, which can run "
                f"arbitrary code when loaded. Convert it to {WEIGHTS_NAME}, or pass "
                "allow_pickle=True if you trust it."
            )
        paths, loader = (
            ([single] if os.path.isfile(single) else _shards(pickle_index)),
            _load_pickle,
        )
    else:
        raise FileNotFoundError(f"No {WEIGHTS_NAME} (or {WEIGHTS_INDEX_NAME}) in {directory}.")
    tensors = {}
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Weights shard not found: {path}")
        tensors.update({_normalize(k): v for k, v in loader(path).items()})
    return tensors, paths[0] if len(paths) == 1 else directory


def read_config(path):
    """The `BertConfig` of the Hugging Face directory at `path` (its config.json).

    Raises:
        FileNotFoundError: no config.json.
    """
    return files.read_config(
        os.path.join(_model_directory(path), CONFIG_NAME), BertConfig.from_hf_json_file
    )


def load(path, build, heads=False, next_sentence=None, config=None, allow_pickle=False):
    """The model `build` makes (a `BertEncoder`, or with `heads` a `BertPretrainer`), with the
    directory's weights.

    Args:
        path: Hugging Face model directory (or its model.safetensors file).
        build: callable (config, heads, next_sentence) -> a new model (`formats.builder`).
        heads: bool. Load the pre-training heads (cls.*) too.
        next_sentence: bool or None. With heads: include the NSP head; None means
            "if the file has cls.seq_relationship".
        config: optional `BertConfig` used instead of config.json.
        allow_pickle: bool. Allow reading pytorch_model.bin with torch (unsafe on
            untrusted files).

    Returns:
        the model.
    """
    directory = _model_directory(path)
    config = config or read_config(directory)
    tensors, source = read_tensors(directory, allow_pickle=allow_pickle)
    prefix = PREFIX if any(k.startswith(PREFIX) for k in tensors) else ""
    if next_sentence is None:
        next_sentence = NSP_KEY in tensors
    model = build(config, heads, next_sentence)

    def key(name):
        return name if name.startswith("cls.") else prefix + name

    if heads:
        _check_tied(tensors, key)
    hint = (
        " (the file has no cls.* pre-training heads; load it with load_encoder)"
        if heads and not any(k.startswith("cls.") for k in tensors)
        else ""
    )
    # BertForMaskedLM files have no pooler (add_pooling_layer=False): warn, keep it random.
    used = weights.assign_arrays(
        HF_NAMES,
        model,
        lambda name: tensors.get(key(name)),
        source=source,
        hint=hint,
        optional=POOLER_KEYS,
    )
    used = {key(name) for name in used}
    weights.warn_unused(
        tensors,
        used,
        source=source,
        ignored=lambda n: (
            n in (key(b) for b in _BUFFERS)
            or n in (DECODER_WEIGHT_KEY, DECODER_BIAS_KEY)
            or (not heads and n.startswith("cls."))
        ),
    )
    return model


def save(model, path, vocab=None, overwrite=False):
    """Writes config.json, model.safetensors and optionally vocab.txt.

    Args:
        model: `BertEncoder` (bare BertModel names) or `BertPretrainer`
            (BertForPreTraining names: "bert." prefix plus cls.*).
        path: output directory; created, or added to (see `keras_bert.io_utils.atomic_files`).
        vocab: optional vocab.txt path or sequence of tokens (must match vocab_size).
        overwrite: bool. Replace these files where they exist.
    """
    encoder, pretrainer = weights.split_model(model)
    arrays = weights.export_arrays(HF_NAMES, model)
    if pretrainer is not None:
        arrays = {(k if k.startswith("cls.") else PREFIX + k): v for k, v in arrays.items()}
    hf_config = encoder.config.to_hf_dict()
    hf_config["architectures"] = ["BertForPreTraining" if pretrainer is not None else "BertModel"]
    names = [CONFIG_NAME, WEIGHTS_NAME] + ([VOCAB_NAME] if vocab is not None else [])
    with atomic_files(path, names, overwrite) as tmp:
        if vocab is not None:
            tokens, what = files.vocab_tokens(vocab)
            write_vocabulary(
                tokens, os.path.join(tmp, VOCAB_NAME), encoder.config.vocab_size, origin=what
            )
        safetensors.numpy.save_file(
            arrays, os.path.join(tmp, WEIGHTS_NAME), metadata={"format": "pt"}
        )
        with open(os.path.join(tmp, CONFIG_NAME), "w", encoding="utf-8") as f:
            json.dump(hf_config, f, indent=2, sort_keys=True)
            f.write("\n")


def directory_of(path):
    """The model directory (holding vocab.txt): `path` or the weights file's directory."""
    return files.directory_of(path)


def casing(path):
    """(lower_case or None, the rule): "do_lower_case" in the directory's tokenizer_config.json,
    else the `lowercase` of tokenizer.json's BertNormalizer."""
    config_path = os.path.join(directory_of(path), TOKENIZER_CONFIG_NAME)
    if os.path.isfile(config_path):
        value = files.read_json_object(config_path).get("do_lower_case")
        if isinstance(value, bool):
            return value, f"{config_path} do_lower_case"
    return tokenizer_json_casing(directory_of(path))


def tokenizer_json_vocabulary(directory):
    """The WordPiece tokens of `directory`/tokenizer.json (id order), or None without one."""
    data = _tokenizer_json(directory)
    if data is None:
        return None
    model = data.get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "WordPiece" or not isinstance(vocab, dict):
        raise ValueError(
            f"{os.path.join(directory, TOKENIZER_JSON)} is a {model.get('type')!r} tokenizer, "
            "not WordPiece: not a BERT vocabulary."
        )
    tokens = [None] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    return load_vocabulary(tokens)


def tokenizer_json_casing(directory):
    """(lower_case or None, the rule) from tokenizer.json's BertNormalizer `lowercase`."""
    data = _tokenizer_json(directory)
    normalizer = (data or {}).get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer" and isinstance(normalizer.get("lowercase"), bool):
        return normalizer["lowercase"], f"{os.path.join(directory, TOKENIZER_JSON)} lowercase"
    return None, None


def _model_directory(path):
    """The directory of `path` (a directory, or its weights file).

    Raises:
        FileNotFoundError: neither exists.
    """
    directory = os.fspath(path)
    if os.path.isfile(directory):
        return os.path.dirname(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"No Hugging Face model directory at {directory}.")
    return directory


def _tokenizer_json(directory):
    path = os.path.join(os.fspath(directory), TOKENIZER_JSON)
    return files.read_json_object(path) if os.path.isfile(path) else None


def _check_tied(tensors, key):
    """A stored decoder must equal what it is tied to; a lone decoder bias stands in for the
    bias."""
    decoder = tensors.get(DECODER_WEIGHT_KEY)
    embeddings = tensors.get(key(WORD_EMBEDDINGS_KEY))
    if decoder is not None and embeddings is not None and not np.array_equal(decoder, embeddings):
        raise CheckpointError(
            f"{DECODER_WEIGHT_KEY} differs from {key(WORD_EMBEDDINGS_KEY)}: an untied MLM output "
            "projection is not supported (BERT ties it to the word embeddings)."
        )
    bias, decoder_bias = tensors.get("cls.predictions.bias"), tensors.get(DECODER_BIAS_KEY)
    if bias is None and decoder_bias is not None:
        tensors["cls.predictions.bias"] = decoder_bias
    elif bias is not None and decoder_bias is not None and not np.array_equal(bias, decoder_bias):
        raise CheckpointError(
            f"{DECODER_BIAS_KEY} differs from cls.predictions.bias (they are tied)."
        )


def _normalize(key):
    """Old-style LayerNorm.gamma / LayerNorm.beta -> LayerNorm.weight / LayerNorm.bias."""
    if ".LayerNorm." in key or key.startswith("LayerNorm."):
        if key.endswith(".gamma"):
            return key[: -len("gamma")] + "weight"
        if key.endswith(".beta"):
            return key[: -len("beta")] + "bias"
    return key


def _shards(index_path):
    with open(index_path, encoding="utf-8") as f:
        try:
            weight_map = json.load(f)["weight_map"]
        except (json.JSONDecodeError, KeyError) as e:
            raise ValueError(f"{index_path} is not a weights index with a weight_map: {e}") from e
    directory = os.path.dirname(index_path)
    return [os.path.join(directory, name) for name in sorted(set(weight_map.values()))]


def _load_safetensors(path):
    try:
        return safetensors.numpy.load_file(path)
    except (safetensors.SafetensorError, OSError, ValueError) as e:
        raise ValueError(f"Cannot read {path}: {e}") from e


def _load_pickle(path):
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            f"Reading {path} needs PyTorch (`pip install torch`); it is not installed."
        ) from e
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() for k, v in state.items()}
