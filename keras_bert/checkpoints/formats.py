"""The table of checkpoint formats, in the order they are detected, the detection, and `load`:
a checkpoint's weights in a model of the classes it is handed (`builder`).

Each format is a module with the same functions:
- `detect(path)`: bool, the path holds this format;
- `read_config(path)`: the `BertConfig` the checkpoint records;
- `load(path, build, heads=False, next_sentence=None, config=None, allow_pickle=False)`:
  `build(config, heads, next_sentence)` (a `BertEncoder`, or with `heads` a `BertPretrainer`)
  with the checkpoint's weights;
- `save(model, path, vocab=None, overwrite=False)`: writes the model in this format (or raises
  ValueError for a format that is only read);
- `directory_of(path)`: the directory of the checkpoint's files (where its vocab.txt is);
- `casing(path)`: (lower_case or None, the rule that says so) from the format's own files or names.
"""

import os
import types

from keras_bert.checkpoints import google, huggingface, pretraining_run

# Detection order: a run's ckpt-<step> before Google's rule (any *.index).
FORMATS: dict[str, types.ModuleType] = {
    "huggingface": huggingface,
    "pretraining_run": pretraining_run,
    "google": google,
}


def detect_format(path: str | os.PathLike[str]) -> str:
    """ "huggingface", "pretraining_run" (a `run_pretraining` model_dir or one of its ckpt-<step>
    prefixes) or "google" for a checkpoint path, by the files present.

    Raises:
        FileNotFoundError: if the path holds none of them.
    """
    path = os.fspath(path)
    for name, module in FORMATS.items():
        if module.detect(path):
            return name
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise FileNotFoundError(f"No checkpoint at {path}: the path does not exist.")
    raise FileNotFoundError(
        f"No checkpoint at {path}: expected a Google checkpoint ({google.CONFIG_NAME} + "
        f"{google.CHECKPOINT_NAME}.index), a Hugging Face directory ({huggingface.CONFIG_NAME} + "
        f"{huggingface.WEIGHTS_NAME}) or a run_pretraining model_dir (ckpt-<step>.index + "
        "bert_config.json)."
    )


def format_module(format: str) -> types.ModuleType:
    """The module of format name `format`.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    if format not in FORMATS:
        raise ValueError(f"Unknown checkpoint format {format!r}; use one of {sorted(FORMATS)}.")
    return FORMATS[format]


def builder(encoder_cls, pretrainer_cls=None, dtype=None):
    """`build(config, heads, next_sentence)` for `load`: a new `encoder_cls(config)` (of Keras
    dtype policy `dtype`), or with `heads` the `pretrainer_cls(encoder, next_sentence=...)` on
    it."""

    def build(config, heads=False, next_sentence=True):
        encoder = encoder_cls(config) if dtype is None else encoder_cls(config, dtype=dtype)
        return pretrainer_cls(encoder, next_sentence=next_sentence) if heads else encoder

    return build


def load(
    path, build, format=None, heads=False, next_sentence=None, config=None, allow_pickle=False
):
    """The model `build` makes with the weights of checkpoint `path` (any format of `FORMATS`).

    Args:
        path: a checkpoint (see `detect_format`).
        build: callable (config, heads, next_sentence) -> a new model (`builder`).
        format: a name of `FORMATS` or None: detect it from the files.
        heads, next_sentence, config, allow_pickle: as `keras_bert.checkpoints.load_pretrainer`.

    Returns:
        the model.
    """
    return format_module(format or detect_format(path)).load(
        path,
        build,
        heads=heads,
        next_sentence=next_sentence,
        config=config,
        allow_pickle=allow_pickle,
    )
