"""Pre-training run directories: the `model_dir` of `keras_bert.pretraining.runner`, read as a
checkpoint.

The runner writes into `model_dir`, at the start of a run (`write_run_files`):
`bert_config.json` (the architecture, in the original format), `vocab.txt` (a copy of the
run's `vocab_file`, if given) and `text_config.json` (`{"lower_case": bool}`, if given).
Its checkpoints `ckpt-<step>` are, on TensorFlow, `tf.train.Checkpoint`s of model (a
`BertPretrainer`), optimizer and seeds (`keras_bert.checkpoints.training.TrainingCheckpoint`),
and on JAX and PyTorch `ckpt-<step>/` directories of the same state as a NumPy archive
(`keras_bert.checkpoints.variables_checkpoint`). `load` reads the encoder, or the pretrainer, of
the newest one (or of the `ckpt-<step>` prefix or directory given), whichever backend wrote it
and whichever reads it.
"""

import json
import os
import re

import tensorflow as tf

from keras_bert.checkpoints import files, variables_checkpoint
from keras_bert.config import BertConfig
from keras_bert.errors import CheckpointError
from keras_bert.io_utils import write_atomic
from keras_bert.text.vocab import load_vocabulary, write_vocabulary

CONFIG_NAME = "bert_config.json"
VOCAB_NAME = files.VOCAB_NAME
TEXT_CONFIG_NAME = "text_config.json"
_CHECKPOINT_RE = re.compile(r"^ckpt-(\d+)$")


def write_run_files(model_dir, bert_config, vocab_file=None, lower_case=None):
    """Writes bert_config.json, and vocab.txt / text_config.json when given, atomically.

    Args:
        model_dir: str. The run directory (local or gs://).
        bert_config: `BertConfig` of the model being trained.
        vocab_file: str or None. The run's vocabulary, copied as vocab.txt.
        lower_case: bool or None. The casing of the run's tokenization.

    Raises:
        ValueError: if the vocabulary's size differs from `bert_config.vocab_size`.
    """
    if vocab_file:
        write_vocabulary(
            load_vocabulary(vocab_file),
            os.path.join(model_dir, VOCAB_NAME),
            bert_config.vocab_size,
            origin=f"vocab_file {vocab_file}",
        )
    if lower_case is not None:
        write_atomic(
            os.path.join(model_dir, TEXT_CONFIG_NAME),
            json.dumps({"lower_case": bool(lower_case)}) + "\n",
        )
    write_atomic(
        os.path.join(model_dir, CONFIG_NAME),
        json.dumps(bert_config.to_dict(), indent=2, sort_keys=True) + "\n",
    )


def detect(path):
    """True for a run directory with a `ckpt-<step>` checkpoint, or one such prefix."""
    return find_checkpoint(path) is not None


def find_checkpoint(path):
    """The `ckpt-<step>` prefix (TensorFlow) or directory (JAX, PyTorch) for `path`, or None if
    `path` is not a run's checkpoint.

    Args:
        path: a run directory (its newest checkpoint is taken) or one `ckpt-<step>` prefix
            (".index" and ".data-*" suffixes accepted) or `ckpt-<step>/` directory in it.
    """
    path = os.fspath(path).rstrip("/")
    if _is_variables_checkpoint(path):
        return path
    if tf.io.gfile.isdir(path):
        state = os.path.join(path, variables_checkpoint.STATE_FILE)
        if tf.io.gfile.exists(state):  # Written on JAX or PyTorch.
            latest = os.path.join(path, files.read_json_object(state).get("latest") or "")
            if _is_variables_checkpoint(latest):
                return latest
        latest = tf.train.latest_checkpoint(path)
        if latest and _CHECKPOINT_RE.match(os.path.basename(latest)):
            return latest
        steps = [
            int(m.group(1))
            for m in (
                _CHECKPOINT_RE.match(os.path.basename(p)[: -len(".index")])
                for p in tf.io.gfile.glob(os.path.join(path, "ckpt-*.index"))
            )
            if m
        ]
        return os.path.join(path, f"ckpt-{max(steps)}") if steps else None
    prefix = re.sub(r"\.(index|data-\d+-of-\d+)$", "", path)
    if _CHECKPOINT_RE.match(os.path.basename(prefix)) and tf.io.gfile.exists(prefix + ".index"):
        return prefix
    return None


def read_config(path):
    """The `BertConfig` the run recorded (its bert_config.json).

    Raises:
        FileNotFoundError: no checkpoint, or no bert_config.json (a run made before runs
            recorded their architecture).
    """
    return _read_config(_prefix(path))[0]


def _prefix(path):
    prefix = find_checkpoint(path)
    if prefix is None:
        raise FileNotFoundError(f"No pre-training checkpoint (ckpt-<step>.index) at {path}.")
    return prefix


def _read_config(prefix):
    """(config, its path) of the run of checkpoint `prefix`."""
    config_path = os.path.join(os.path.dirname(prefix), CONFIG_NAME)
    if not tf.io.gfile.exists(config_path):
        raise FileNotFoundError(
            f"The pre-training run {os.path.dirname(prefix)} has no {CONFIG_NAME}: it was made "
            f"before runs recorded their architecture. Write the run's BertConfig there "
            f"(keras_bert.BertConfig(...).to_json_file('{config_path}')) to load it."
        )
    try:  # Through tf.io.gfile: runs on gs:// load too.
        return BertConfig.from_dict(files.read_json_object(config_path)), config_path
    except (ValueError, TypeError) as e:
        raise ValueError(f"{config_path}: {e}") from e


def load(path, build, heads=False, next_sentence=None, config=None, allow_pickle=False):
    """The encoder, or the whole pre-trainer (`heads`), of a run's newest checkpoint, as `build`
    makes it.

    Args:
        path: a run directory or a `ckpt-<step>` prefix in it.
        build: callable (config, heads, next_sentence) -> a new model (`formats.builder`).
        heads: bool. A `BertPretrainer` with its masked-LM (and next-sentence) head.
        next_sentence: bool or None (heads only). The NSP head; None: if the run trained one.
        config: must be None: the run has its own bert_config.json.
        allow_pickle: bool. Unused: this format holds no pickles.

    Returns:
        the model.

    Raises:
        FileNotFoundError: no checkpoint, or no bert_config.json (a run made before runs
            recorded their architecture).
        CheckpointError: the checkpoint is corrupt or does not hold that model; or
            next_sentence=True and the run has no NSP head.
        ValueError: a `config` was given.
    """
    if config is not None:
        raise ValueError(
            f"config applies to Google and Hugging Face checkpoints; the run {path} has its "
            f"own bert_config.json."
        )
    prefix = _prefix(path)
    config, config_path = _read_config(prefix)
    if _is_variables_checkpoint(prefix):
        return _load_variables(prefix, build, config, heads, next_sentence, config_path)
    files.verify_checkpoint(prefix)
    trained_nsp = heads and any(
        name.startswith("model/next_sentence_head/") for name, _ in tf.train.list_variables(prefix)
    )
    model = build(config, heads, _next_sentence(prefix, heads, next_sentence, trained_nsp))
    # The runner saves tf.train.Checkpoint(model=pretrainer, ...): the encoder is model/encoder.
    root = tf.train.Checkpoint(model=model if heads else tf.train.Checkpoint(encoder=model))
    try:
        status = root.read(prefix)
        # The optimizer and the seeds (and the heads, for an encoder) are not read.
        status.expect_partial()
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        detail = str(e).split(": [<")[0][
            :300
        ]  # TF lists the unmatched variables with all their values.
        raise CheckpointError(
            f"Checkpoint {prefix} does not hold {_what(heads)} as described by {config_path}: "
            f"{detail}"
        ) from e
    return model


def _what(heads):
    return "a pretrainer (encoder and heads)" if heads else "an encoder"


def _next_sentence(prefix, heads, next_sentence, trained_nsp):
    """Whether the model to read checkpoint `prefix` into has an NSP head: with heads, if the
    run trained one (or as `next_sentence` asks, if it can be read)."""
    if not heads:
        return False
    if next_sentence and not trained_nsp:
        raise CheckpointError(
            f"Checkpoint {prefix} has no next-sentence head (an MLM-only run); "
            f"pass next_sentence=False or None."
        )
    return trained_nsp if next_sentence is None else next_sentence


def _is_variables_checkpoint(path):
    return tf.io.gfile.exists(os.path.join(path, variables_checkpoint.ARRAYS))


def _load_variables(directory, build, config, heads, next_sentence, config_path):
    """The encoder (or pretrainer) of a `ckpt-<step>/` directory written on JAX or PyTorch: its
    weights by path (the optimizer's state and the dropout seeds are not read)."""
    saved = variables_checkpoint.read_arrays(os.path.join(directory, variables_checkpoint.ARRAYS))
    trained_nsp = any(path.startswith("cls_seq_relationship/") for path in saved)
    model = build(config, heads, _next_sentence(directory, heads, next_sentence, trained_nsp))
    wanted = [w for w in model.weights if "seed_generator" not in w.path]
    missing = [w.path for w in wanted if w.path not in saved]
    wrong = [
        f"{w.path}: saved {list(saved[w.path].shape)}, here {list(w.shape)}"
        for w in wanted
        if w.path in saved and tuple(saved[w.path].shape) != tuple(w.shape)
    ]
    if missing or wrong:
        raise CheckpointError(
            f"Checkpoint {directory} does not hold {_what(heads)} as described by "
            f"{config_path}: "
            + "; ".join((["missing " + ", ".join(missing[:5])] if missing else []) + wrong[:5])
        )
    for w in wanted:
        w.assign(saved[w.path].astype(w.dtype))
    return model


def save(model, path, vocab=None, overwrite=False):
    """Not a format to save to: a run directory is written by the pre-training runner.

    Raises:
        ValueError: always, naming the formats to save to.
    """
    raise ValueError(
        f"A pre-training run directory is written by run_pretraining, not saved to ({path}); "
        f"save with format='google' or 'huggingface'."
    )


def casing(path):
    """(lower_case or None, the rule): the `lower_case` the run recorded in text_config.json.

    Raises:
        ValueError: text_config.json holds something else than true or false.
    """
    text_config = os.path.join(directory_of(path), TEXT_CONFIG_NAME)
    if not tf.io.gfile.exists(text_config):
        return None, None
    value = files.read_json_object(text_config).get("lower_case")
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{text_config}: lower_case must be true or false, got {value!r}.")
    return value, (None if value is None else f"{text_config} lower_case")


def directory_of(path):
    """The run directory (holding vocab.txt) of a run directory or of a `ckpt-<step>` prefix in
    it."""
    prefix = find_checkpoint(path)
    return os.path.dirname(prefix) if prefix else os.fspath(path)
