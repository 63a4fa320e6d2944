"""Files of a checkpoint directory: the config read with errors naming it, atomic writes, the vocabulary."""

import contextlib
import json
import os
import shutil
import tempfile

import tensorflow as tf


def read_config(config_path, parse):
    """`parse(config_path)` (a `BertConfig` reader), with errors naming the file."""
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"Config file not found: {config_path} (pass config= to give one).")
    try:
        return parse(config_path)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{config_path}: {e}") from e


def read_json_object(path):
    """The dict in JSON file `path` (local or gs://); ValueError naming the file if it is not one."""
    with tf.io.gfile.GFile(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data


@contextlib.contextmanager
def atomic_files(path, names, overwrite=False):
    """Yields a temporary directory; on success its files appear in `path`, beside the files
    already there (`keras_bert.training.io_utils.atomic_directory` replaces a whole directory).

    A new `path` appears whole, by one rename. Into an existing directory (other files
    there are kept), each file is moved with `os.replace`, so no reader sees a partial
    file. On error nothing is changed and the temporary directory is removed.

    Args:
        path: output directory.
        names: file names that will be written (checked against existing files).
        overwrite: bool. Replace those files where they already exist.
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"Checkpoint output {path} exists and is not a directory.")
    exists = os.path.isdir(path)
    if exists and not overwrite:
        clashes = sorted(n for n in names if os.path.exists(os.path.join(path, n)))
        if clashes:
            raise FileExistsError(f"{path} already holds {clashes}; pass overwrite=True to replace them.")
    parent = path if exists else os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        yield tmp
        written = os.listdir(tmp)
        if not exists:
            os.chmod(tmp, 0o755)  # mkdtemp makes it private.
            os.rename(tmp, path)
            return
        # Index and config last: their presence marks the checkpoint complete.
        for name in sorted(written, key=lambda n: n.endswith((".index", ".json"))):
            os.replace(os.path.join(tmp, name), os.path.join(path, name))
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp)


def write_vocab(vocab, path, vocab_size):
    """Writes `vocab` (a vocab.txt path or a sequence of tokens) to `path`, one token a line.

    Raises:
        ValueError: if the number of tokens differs from `vocab_size`.
    """
    if isinstance(vocab, (str, os.PathLike)):
        with open(vocab, encoding="utf-8") as f:
            tokens = f.read().splitlines()
        what = os.fspath(vocab)
    else:
        tokens = [str(t) for t in vocab]
        what = "vocab"
    if len(tokens) != vocab_size:
        raise ValueError(f"{what} has {len(tokens)} tokens but the model's vocab_size is {vocab_size}.")
    if any("\n" in t or "\r" in t for t in tokens):
        raise ValueError(f"{what} has tokens containing line breaks.")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))

