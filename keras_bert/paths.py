"""Early checks of the paths a user gives (light: no TensorFlow), so that a typo fails at once
with the setting's name, the path and what belongs there, not minutes later deep in a load."""

import os

# What an init_checkpoint setting may name (for the message of a missing one).
INIT_CHECKPOINT_KINDS = (
    "a Google checkpoint (bert_config.json + bert_model.ckpt.*), a Hugging Face directory "
    "(config.json + model.safetensors) or a run_pretraining model_dir (ckpt-<step>.*)"
)


def is_remote(path):
    """True for URLs such as gs://bucket/dir: checked where they are read, through tf.io.gfile."""
    return "://" in str(path)


def require_path(name, path, expected, directory=False):
    """Raises if a local `path` given as setting `name` does not exist.

    A checkpoint prefix (`dir/bert_model.ckpt`, whose files are `dir/bert_model.ckpt.index`
    ...) counts as existing. Remote paths and empty values are not checked.

    Args:
        name: str, the setting (= command-line flag) name, e.g. "init_checkpoint".
        path: str or None.
        expected: str, what should be there, e.g. "a vocab.txt".
        directory: bool, the path must be a directory.

    Raises:
        FileNotFoundError: no such path.
        NotADirectoryError: `directory` and the path is a file.
    """
    if not path or is_remote(path):
        return
    path = os.fspath(path)
    if directory and os.path.isfile(path):
        raise NotADirectoryError(f"{name}={path} is a file; expected a directory: {expected}.")
    if os.path.exists(path) or (not directory and os.path.exists(path + ".index")):
        return
    raise FileNotFoundError(f"{name}={path} does not exist; expected {expected}.")
