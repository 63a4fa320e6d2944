"""Checkpoints in and out, every format of the package: original Google TF1 checkpoints, Hugging
Face BERT directories and pre-training run directories (read through one table, `FORMATS`, see
`keras_bert.checkpoints.formats`); also the training checkpoints (`training`), fine-tuned task
model directories (`task_model`), an encoder with its vocabulary and casing for a task
(`load_init_checkpoint`), and the loader behind every `from_preset` (`from_preset`).

>>> encoder = load_encoder("uncased_L-12_H-768_A-12")              # doctest: +SKIP
>>> pretrainer = load_pretrainer("bert-base-uncased-hf-dir")       # doctest: +SKIP
>>> save(pretrainer, "out_dir", format="google", vocab="vocab.txt")  # doctest: +SKIP

The formats read files into a config, named arrays and a vocabulary and are handed the classes
to build (`formats.builder`): they import no model, and the models' `from_preset` reads through
them. The modules that build our models (`init_checkpoint`: `load_encoder`, `load_pretrainer`,
`load_init_checkpoint`) or hold training state (`training`) sit above the models; their names
here load on first use.

Policy on mismatches: a missing file, a missing variable or a shape mismatch raises
(`FileNotFoundError` / `CheckpointError`, naming the file, the variable and expected vs
found shapes); variables the model does not use give a warning, except optimizer state
(adam_m, adam_v, global_step) and, when loading an encoder, the pre-training heads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from keras_bert._lazy import attach
from keras_bert.checkpoints import files, google, hf_tasks, huggingface
from keras_bert.checkpoints.formats import FORMATS, detect_format, format_module
from keras_bert.errors import CheckpointError

if TYPE_CHECKING:
    import keras

__all__ = [
    "CheckpointError",
    "FORMATS",
    "InitCheckpoint",
    "casing",
    "detect_format",
    "download",
    "load_encoder",
    "load_init_checkpoint",
    "load_pretrainer",
    "save",
    "vocab_path",
]
_NAMES = {
    name: f"keras_bert.checkpoints.init_checkpoint:{name}"
    for name in ("InitCheckpoint", "load_encoder", "load_init_checkpoint", "load_pretrainer")
}
__getattr__, __dir__ = attach(__name__, _NAMES)


def download(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str] = "downloads") -> str:
    """A released checkpoint as a local directory: a `.zip` URL (or file) is downloaded once into
    `cache_dir` and unpacked; anything else is returned unchanged.

    >>> download(
    ...     "https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-4_H-256_A-4.zip"
    ... )  # doctest: +SKIP
    'downloads/uncased_L-4_H-256_A-4.zip'

    Args:
        path: str. A URL (https://, file://) or local path ending in ".zip", or a checkpoint
            path of any kind (directory, gs://).
        cache_dir: str. Where archives are kept and unpacked (created if missing).

    Returns:
        str, the directory holding the checkpoint's config (bert_config.json or config.json).

    Raises:
        FileNotFoundError: the archive holds no BERT config.
    """
    path = os.fspath(path)
    if not path.endswith(".zip"):
        return path
    import glob

    import keras

    if "://" not in path:
        path = "file://" + os.path.abspath(path)
    cache_dir = os.path.abspath(cache_dir)
    os.makedirs(
        cache_dir, exist_ok=True
    )  # Keras falls back to a temporary folder for a missing cache_dir.
    unpacked = keras.utils.get_file(origin=path, extract=True, cache_dir=cache_dir, cache_subdir="")
    configs = sorted(
        glob.glob(os.path.join(unpacked, "**", google.CONFIG_NAME), recursive=True)
        + glob.glob(os.path.join(unpacked, "**", huggingface.CONFIG_NAME), recursive=True)
    )
    if not configs:
        raise FileNotFoundError(
            f"{path} unpacked to {unpacked} holds no {google.CONFIG_NAME} or "
            f"{huggingface.CONFIG_NAME}: not a BERT checkpoint archive."
        )
    return os.path.dirname(min(configs, key=len))  # The shallowest one.


def save(
    model: keras.Model,
    path: str | os.PathLike[str],
    format: str = "google",
    vocab: str | os.PathLike[str] | Sequence[str] | None = None,
    overwrite: bool = False,
) -> None:
    """Writes a `BertEncoder` or `BertPretrainer` in the original or Hugging Face format, or a
    fine-tuned task model as a Hugging Face `BertFor...` directory (labels and tokenizer files
    included; see `keras_bert.checkpoints.hf_tasks`).

    Args:
        model: `BertEncoder`, `BertPretrainer`, or (format="huggingface") a task model.
        path: output directory. A new directory appears whole (one rename); in an
            existing one each file is replaced atomically and other files are kept.
        format: "google" (bert_config.json + bert_model.ckpt.*) or "huggingface"
            (config.json + model.safetensors).
        vocab: optional vocab.txt path or sequence of tokens, written as vocab.txt.
        overwrite: bool. Replace existing files of the same names; otherwise
            `FileExistsError`.
    """
    if hasattr(model, "task_info"):  # A task model: only Hugging Face has task heads.
        if format != "huggingface":
            raise ValueError(f"A {type(model).__name__} is written with format='huggingface'.")
        _save_task(model, path, vocab, overwrite)
        return
    format_module(format).save(model, path, vocab=vocab, overwrite=overwrite)


def _save_task(model, path, vocab, overwrite):
    """A fine-tuned task model as a Hugging Face directory (`hf_tasks.save_task`): its
    preprocessor's vocabulary and casing, its labels."""
    info = model.task_info() if model.preprocessor is not None else None
    if vocab is None and info is None:
        raise ValueError(f"The {type(model).__name__} has no preprocessor: pass vocab=.")
    hf_tasks.save_task(
        model,
        path,
        vocab if vocab is not None else model.preprocessor.tokenizer.vocabulary,
        info["lower_case"] if info else True,
        labels=(info or {}).get("labels"),
        overwrite=overwrite,
    )


def vocab_path(path: str | os.PathLike[str], format: str | None = None) -> str | None:
    """The vocab.txt in a checkpoint's directory (local or gs://), or None.

    Args:
        path: checkpoint directory, prefix or weights file, or a run directory or ckpt-<step>
            prefix.
        format: a name of `FORMATS`, or None: detect it from the files; where none is detected
            (e.g. a directory holding only the vocabulary), `path` is taken as the directory.
    """
    if format is None:
        format = next((name for name, module in FORMATS.items() if module.detect(path)), None)
    directory = (
        files.directory_of(path) if format is None else format_module(format).directory_of(path)
    )
    return files.vocab_in(directory)


def casing(path: str | os.PathLike[str], format: str | None = None) -> tuple[bool | None, str]:
    """(lower_case or None, the rule that says so), by the format's own rule (see `FORMATS`)."""
    return format_module(format or detect_format(path)).casing(path)
