"""Checkpoints in and out: original Google TF1 checkpoints and Hugging Face BERT directories.

>>> encoder = load_encoder("uncased_L-12_H-768_A-12")              # doctest: +SKIP
>>> pretrainer = load_pretrainer("bert-base-uncased-hf-dir")       # doctest: +SKIP
>>> save(pretrainer, "out_dir", format="google", vocab="vocab.txt")  # doctest: +SKIP

Policy on mismatches: a missing file, a missing variable or a shape mismatch raises
(`FileNotFoundError` / `CheckpointError`, naming the file, the variable and expected vs
found shapes); variables the model does not use give a warning, except optimizer state
(adam_m, adam_v, global_step) and, when loading an encoder, the pre-training heads.
"""

import os

from keras_bert.checkpoints import google, huggingface
from keras_bert.checkpoints.weights import CheckpointError

FORMATS = {"google": google, "huggingface": huggingface}

__all__ = ["CheckpointError", "FORMATS", "detect_format", "download", "load_encoder", "load_pretrainer", "save",
           "vocab_path"]


def download(path, cache_dir="downloads"):
    """A released checkpoint as a local directory: a `.zip` URL (or file) is downloaded once into
    `cache_dir` and unpacked; anything else is returned unchanged.

    >>> download("https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-4_H-256_A-4.zip")  # doctest: +SKIP
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
    os.makedirs(cache_dir, exist_ok=True)  # Keras falls back to /tmp/.keras for a missing cache_dir.
    unpacked = keras.utils.get_file(origin=path, extract=True, cache_dir=cache_dir, cache_subdir="")
    configs = sorted(glob.glob(os.path.join(unpacked, "**", google.CONFIG_NAME), recursive=True) +
                     glob.glob(os.path.join(unpacked, "**", huggingface.CONFIG_NAME), recursive=True))
    if not configs:
        raise FileNotFoundError(f"{path} unpacked to {unpacked} holds no {google.CONFIG_NAME} or "
                                f"{huggingface.CONFIG_NAME}: not a BERT checkpoint archive.")
    return os.path.dirname(min(configs, key=len))  # The shallowest one.


def detect_format(path):
    """"google", "huggingface" or "pretraining_run" (a `run_pretraining` model_dir or one of its
    ckpt-<step> prefixes) for a checkpoint path, by the files present.

    Raises:
        FileNotFoundError: if the path holds neither.
    """
    path = os.fspath(path)
    if huggingface.is_directory(path):
        return "huggingface"
    from keras_bert.pretraining import run_dir  # Built on this package: imported on use.

    if run_dir.find_checkpoint(path) is not None:  # ckpt-<step>: before Google's (any *.index) rule.
        return "pretraining_run"
    if google.is_checkpoint(path):
        return "google"
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise FileNotFoundError(f"No checkpoint at {path}: the path does not exist.")
    raise FileNotFoundError(
        f"No checkpoint at {path}: expected a Google checkpoint ({google.CONFIG_NAME} + "
        f"{google.CHECKPOINT_NAME}.index), a Hugging Face directory ({huggingface.CONFIG_NAME} + "
        f"{huggingface.WEIGHTS_NAME}) or a run_pretraining model_dir (ckpt-<step>.index + bert_config.json).")


def load_encoder(path, format=None, config=None, dtype=None, allow_pickle=False):
    """A `BertEncoder` with weights from a Google checkpoint, a Hugging Face directory or a
    pre-training run.

    Args:
        path: checkpoint directory, Google checkpoint prefix, HF directory, or a `run_pretraining`
            model_dir (its newest checkpoint) or ckpt-<step> prefix.
        format: "google", "huggingface", "pretraining_run" or None (detect from the files).
        config: optional `BertConfig` used instead of the config file (not for runs).
        dtype: optional Keras dtype policy (e.g. "mixed_bfloat16").
        allow_pickle: bool. Hugging Face only: read pytorch_model.bin with torch.

    Returns:
        `BertEncoder`.
    """
    return _load(path, format, heads=False, config=config, dtype=dtype, allow_pickle=allow_pickle)


def load_pretrainer(path, format=None, next_sentence=None, config=None, dtype=None, allow_pickle=False):
    """A `BertPretrainer` with encoder and pre-training head weights.

    Args:
        path, format, config, dtype, allow_pickle: as in `load_encoder`.
        next_sentence: bool or None. Include the NSP head; None means "if the
            checkpoint has one" (e.g. Hugging Face BertForMaskedLM has none).

    Returns:
        `BertPretrainer`.
    """
    return _load(path, format, heads=True, next_sentence=next_sentence, config=config, dtype=dtype,
                 allow_pickle=allow_pickle)


def save(model, path, format="google", vocab=None, overwrite=False):
    """Writes a `BertEncoder` or `BertPretrainer` in the original or Hugging Face format.

    Args:
        model: `BertEncoder` or `BertPretrainer`.
        path: output directory. A new directory appears whole (one rename); in an
            existing one each file is replaced atomically and other files are kept.
        format: "google" (bert_config.json + bert_model.ckpt.*) or "huggingface"
            (config.json + model.safetensors).
        vocab: optional vocab.txt path or sequence of tokens, written as vocab.txt.
        overwrite: bool. Replace existing files of the same names; otherwise
            `FileExistsError`.
    """
    _module(format).save(model, path, vocab=vocab, overwrite=overwrite)


def vocab_path(path):
    """The vocab.txt beside a checkpoint (directory, prefix or weights file; local or gs://), or None."""
    import tensorflow as tf

    path = os.fspath(path)
    candidate = os.path.join(path if tf.io.gfile.isdir(path) else os.path.dirname(path), "vocab.txt")
    return candidate if tf.io.gfile.exists(candidate) and not tf.io.gfile.isdir(candidate) else None


def _load(path, format, heads, config, dtype, allow_pickle, next_sentence=None):
    format = format or detect_format(path)
    if format == "pretraining_run":
        if config is not None:
            raise ValueError(f"config applies to Google and Hugging Face checkpoints; the run {path} has its "
                             f"own bert_config.json.")
        from keras_bert.pretraining import run_dir

        return run_dir.load(path, heads=heads, next_sentence=next_sentence, dtype=dtype)[0]
    kwargs = dict(heads=heads, next_sentence=next_sentence, config=config, dtype=dtype)
    if format == "huggingface":
        kwargs["allow_pickle"] = allow_pickle
    return _module(format).load(path, **kwargs)


def _module(format):
    if format not in FORMATS:
        raise ValueError(f"Unknown checkpoint format {format!r}; use one of {sorted(FORMATS)}.")
    return FORMATS[format]
