"""Files of a checkpoint directory: the config read with errors naming it, the vocabulary, a TF
checkpoint read whole."""

import json
import os

import tensorflow as tf

from keras_bert.errors import CheckpointError

VOCAB_NAME = "vocab.txt"


def read_config(config_path, parse):
    """`parse(config_path)` (a `BertConfig` reader), with errors naming the file."""
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"Config file not found: {config_path} (pass config= to give one).")
    try:
        return parse(config_path)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{config_path}: {e}") from e


def read_json_object(path):
    """The dict in JSON file `path` (local or gs://); ValueError naming the file if it is not
    one."""
    with tf.io.gfile.GFile(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data


def vocab_tokens(vocab):
    """(tokens, what names them in errors) for a vocab.txt path (local or gs://) or a sequence of
    tokens."""
    if isinstance(vocab, (str, os.PathLike)):
        with tf.io.gfile.GFile(os.fspath(vocab), "rb") as f:
            return f.read().decode("utf-8").splitlines(), os.fspath(vocab)
    return [str(t) for t in vocab], "vocab"


def directory_of(path):
    """`path` if it is a directory (local or gs://), else the directory of the file or prefix
    `path`."""
    path = os.fspath(path)
    return path if tf.io.gfile.isdir(path) else os.path.dirname(path)


def vocab_in(directory):
    """The vocab.txt in `directory` (local or gs://), or None."""
    candidate = os.path.join(os.fspath(directory), VOCAB_NAME)
    return candidate if tf.io.gfile.exists(candidate) and not tf.io.gfile.isdir(candidate) else None


def verify_checkpoint(path):
    """Read every tensor of checkpoint `path`; raise `CheckpointError` if any is unreadable."""
    try:
        reader = tf.train.load_checkpoint(path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError) as e:
        message = getattr(e, "message", str(e))
        raise CheckpointError(
            f"Checkpoint {path} is corrupt or incomplete: {message}. Delete it (and its "
            f"entry in the 'checkpoint' file) to resume from an earlier one."
        ) from e
