"""Original Google TF1 BERT checkpoints: bert_config.json, bert_model.ckpt.{index,data-*},
vocab.txt.

Read with `tf.train.load_checkpoint` (no TF1 graph code); written with `tf.raw_ops.SaveV2`
under the released variable names, so the original scripts and tools read them back.
Optimizer slots (adam_m, adam_v) and global_step are skipped; other variables the model
does not use give a warning; missing variables or shape mismatches raise `CheckpointError`.
"""

import glob
import os
import re

import tensorflow as tf

from keras_bert.checkpoints import files, weights
from keras_bert.config import BertConfig
from keras_bert.io_utils import atomic_files
from keras_bert.text.vocab import write_vocabulary

CONFIG_NAME = "bert_config.json"
CHECKPOINT_NAME = "bert_model.ckpt"
VOCAB_NAME = files.VOCAB_NAME

_DENSE = (("kernel", "kernel", False), ("bias", "bias", False))
_NORM = (("gamma", "gamma", False), ("beta", "beta", False))
_LAYER = "bert/encoder/layer_{i}/"

# The one table for this format: (our canonical name, released variable name, transpose).
GOOGLE_NAMES = (
    ("embeddings/word_embeddings", "bert/embeddings/word_embeddings", False),
    ("embeddings/token_type_embeddings", "bert/embeddings/token_type_embeddings", False),
    ("embeddings/position_embeddings", "bert/embeddings/position_embeddings", False),
    *weights.rows("embeddings/LayerNorm", "bert/embeddings/LayerNorm/", _NORM),
    *weights.rows("layer_{i}/query", _LAYER + "attention/self/query/", _DENSE),
    *weights.rows("layer_{i}/key", _LAYER + "attention/self/key/", _DENSE),
    *weights.rows("layer_{i}/value", _LAYER + "attention/self/value/", _DENSE),
    *weights.rows("layer_{i}/attention_output_dense", _LAYER + "attention/output/dense/", _DENSE),
    *weights.rows(
        "layer_{i}/attention_output_LayerNorm", _LAYER + "attention/output/LayerNorm/", _NORM
    ),
    *weights.rows("layer_{i}/intermediate_dense", _LAYER + "intermediate/dense/", _DENSE),
    *weights.rows("layer_{i}/output_dense", _LAYER + "output/dense/", _DENSE),
    *weights.rows("layer_{i}/output_LayerNorm", _LAYER + "output/LayerNorm/", _NORM),
    *weights.rows("pooler_dense", "bert/pooler/dense/", _DENSE),
    *weights.rows("cls_predictions/transform_dense", "cls/predictions/transform/dense/", _DENSE),
    *weights.rows(
        "cls_predictions/transform_LayerNorm", "cls/predictions/transform/LayerNorm/", _NORM
    ),
    ("cls_predictions/output_bias", "cls/predictions/output_bias", False),
    # Stored as [2, H]: the transpose of a Dense kernel.
    ("cls_seq_relationship/kernel", "cls/seq_relationship/output_weights", True),
    ("cls_seq_relationship/bias", "cls/seq_relationship/output_bias", False),
)
NSP_NAME = "cls/seq_relationship/output_weights"

# The released names (google-research/bert tokenization.validate_case_matches_checkpoint).
_RELEASED_NAME_RE = re.compile(
    r"^(?:wwm_)?(uncased|cased|multi_cased|multilingual|chinese)_L-\d+_H-\d+_A-\d+"
)
_RELEASED_LOWER = {
    "uncased": True,
    "multilingual": True,
    "chinese": True,
    "cased": False,
    "multi_cased": False,
}


def detect(path):
    """True for a directory holding a TF checkpoint or bert_config.json, or a checkpoint prefix."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return os.path.isfile(os.path.join(path, CONFIG_NAME)) or bool(
            glob.glob(os.path.join(path, "*.index"))
        )
    return os.path.isfile(_strip_suffix(path) + ".index")


def resolve(path):
    """(checkpoint prefix, bert_config.json path) for a directory or a checkpoint prefix.

    Raises:
        FileNotFoundError: naming what is missing.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        prefix = os.path.join(path, CHECKPOINT_NAME)
        if not os.path.isfile(prefix + ".index"):
            latest = tf.train.latest_checkpoint(path)
            indexes = sorted(glob.glob(os.path.join(path, "*.index")))
            if latest:
                prefix = latest
            elif len(indexes) == 1:
                prefix = indexes[0][: -len(".index")]
            else:
                found = f"; found {len(indexes)} *.index files" if indexes else ""
                raise FileNotFoundError(f"No checkpoint {prefix}.index in {path}{found}.")
        return prefix, os.path.join(path, CONFIG_NAME)
    prefix = _strip_suffix(path)
    if not os.path.isfile(prefix + ".index"):
        raise FileNotFoundError(f"No TF checkpoint at {path}: {prefix}.index does not exist.")
    return prefix, os.path.join(os.path.dirname(prefix), CONFIG_NAME)


def read_config(path):
    """The `BertConfig` of the checkpoint at `path` (its bert_config.json).

    Raises:
        FileNotFoundError: no bert_config.json beside it.
    """
    return files.read_config(
        os.path.join(directory_of(path), CONFIG_NAME), BertConfig.from_json_file
    )


def load(path, build, heads=False, next_sentence=None, config=None, allow_pickle=False):
    """The model `build` makes (a `BertEncoder`, or with `heads` a `BertPretrainer`), with the
    checkpoint's weights.

    Args:
        path: checkpoint directory or prefix (".../bert_model.ckpt").
        build: callable (config, heads, next_sentence) -> a new model (`formats.builder`).
        heads: bool. Load the pre-training heads too.
        next_sentence: bool or None. With heads: include the NSP head; None means
            "if the checkpoint has it".
        config: optional `BertConfig` used instead of bert_config.json.
        allow_pickle: bool. Unused: this format holds no pickles.

    Returns:
        the model.
    """
    prefix, config_path = resolve(path)
    config = config or files.read_config(config_path, BertConfig.from_json_file)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise ValueError(f"Cannot read TF checkpoint {prefix}: {e}") from e
    shapes = reader.get_variable_to_shape_map()
    if next_sentence is None:
        next_sentence = NSP_NAME in shapes
    model = build(config, heads, next_sentence)
    hint = (
        ""
        if any(n.startswith("bert/") for n in shapes)
        else (" (the file has no bert/... variables: not an original TF1 BERT checkpoint?)")
    )
    if heads and not any(n.startswith("cls/") for n in shapes):
        hint += " (the file has no pre-training heads; load it with load_encoder)"
    used = weights.assign_arrays(
        GOOGLE_NAMES,
        model,
        lambda name: reader.get_tensor(name) if name in shapes else None,
        source=prefix,
        hint=hint,
    )
    weights.warn_unused(
        shapes, used, ignored=lambda n: not heads and n.startswith("cls/"), source=prefix
    )
    return model


def save(model, path, vocab=None, overwrite=False):
    """Writes bert_config.json, bert_model.ckpt.* (released names) and optionally vocab.txt.

    Args:
        model: `BertEncoder` (bert/... variables) or `BertPretrainer` (plus cls/...).
        path: output directory; created, or added to (see `keras_bert.io_utils.atomic_files`).
        vocab: optional vocab.txt path or sequence of tokens (must match vocab_size).
        overwrite: bool. Replace these files where they exist.
    """
    encoder, _ = weights.split_model(model)
    arrays = weights.export_arrays(GOOGLE_NAMES, model)
    names = [CONFIG_NAME, CHECKPOINT_NAME + ".index", CHECKPOINT_NAME + ".data-00000-of-00001"]
    with atomic_files(path, names + ([VOCAB_NAME] if vocab is not None else []), overwrite) as tmp:
        if vocab is not None:
            tokens, what = files.vocab_tokens(vocab)
            write_vocabulary(
                tokens, os.path.join(tmp, VOCAB_NAME), encoder.config.vocab_size, origin=what
            )
        tf.raw_ops.SaveV2(
            prefix=os.path.join(tmp, CHECKPOINT_NAME),
            tensor_names=list(arrays),
            shape_and_slices=[""] * len(arrays),
            tensors=list(arrays.values()),
        )
        encoder.config.to_json_file(os.path.join(tmp, CONFIG_NAME))


def directory_of(path):
    """The directory of the checkpoint's files (holding vocab.txt): `path` or the prefix's
    directory."""
    return files.directory_of(path)


def casing(path):
    """(lower_case or None, the rule) from the released directory names, as the original
    `validate_case_matches_checkpoint`: uncased_*, multilingual_*, chinese_* are uncased;
    cased_*, multi_cased_* are cased (also with a wwm_ prefix, e.g. uncased_L-12_H-768_A-12).

    Args:
        path: checkpoint directory or prefix.
    """
    name = os.path.basename(os.path.abspath(directory_of(path)))
    match = _RELEASED_NAME_RE.match(name)
    if match:
        return _RELEASED_LOWER[match.group(1)], f"released Google checkpoint name {name}"
    return None, None


def _strip_suffix(path):
    for suffix in (".index", ".meta"):
        if path.endswith(suffix):
            return path[: -len(suffix)]
    if ".data-" in os.path.basename(path):
        return path[: path.rindex(".data-")]
    return path
