"""What an export starts from: a fine-tuned task model directory, or a pre-trained encoder.

`load_source(path)` reads either
- the `model/` directory that `keras_bert.tasks.finetune` writes (`model.keras`, `task.json`,
  `vocab.txt`), or the run directory holding it; the task's `problem` in task.json picks the
  serving signatures (`keras_bert.export.signatures.BUILDERS`);
- a pre-trained encoder with no task: a Google TF1 checkpoint, a Hugging Face directory or a
  pre-training run directory (`keras_bert.tasks.init_checkpoint`), exported as a feature
  extractor (kind "encoder"), with its masked-LM head when the checkpoint has one.
"""

import dataclasses
import json
import os

import keras
import tensorflow as tf
from absl import logging

from keras_bert.text.tokenizer import BertTokenizer

TASK_FILE = "task.json"  # Written by keras_bert.tasks.runner.save_task_model.
DEFAULT_SEQ_LENGTH = 128  # For encoders (TF Hub's BERT preprocessors use 128 too).


@dataclasses.dataclass
class ExportSource:
    """A model ready for export, with its tokenizer.

    Attributes:
        kind: str, the signature builder: task.json's `problem` ("classification",
            "regression", ...) or "encoder".
        tokenizer: `keras_bert.text.BertTokenizer` (the vocabulary and casing of training).
        seq_length: int, longest packed sequence; longer inputs are truncated.
        encoder: `keras_bert.BertEncoder`.
        model: the task model (a `keras_bert.models.task_models` class), or None for an encoder.
        pretrainer: `keras_bert.BertPretrainer` sharing `encoder`, when the masked-LM head is
            available (pre-trained checkpoints with cls/ heads), else None.
        info: dict, task.json (for an encoder: kind, seq_length, lower_case, text_inputs).
        path: str, where it was read from.
    """

    kind: str
    tokenizer: BertTokenizer
    seq_length: int
    encoder: keras.Model
    model: keras.Model = None
    pretrainer: keras.Model = None
    info: dict = dataclasses.field(default_factory=dict)
    path: str = ""

    @property
    def text_inputs(self):
        """Names of the text inputs, e.g. ("text",) or ("text", "text_b")."""
        return tuple(self.info.get("text_inputs") or ("text",))


def load_source(path, seq_length=None, mlm=None):
    """Reads a task model directory or a pre-trained encoder (see the module docstring).

    Args:
        path: str. A fine-tuned `model/` directory (or its run directory), a Google
            checkpoint, a Hugging Face directory or a pre-training run directory.
        seq_length: int or None. Longest packed sequence (default: the task's training
            length from task.json; 128 for encoders). At most max_position_embeddings.
        mlm: bool or None. Load the masked-LM head of a pre-trained checkpoint: None if the
            checkpoint has one, True requires it, False skips it.

    Returns:
        `ExportSource`.

    Raises:
        FileNotFoundError: nothing exportable at `path`.
        ValueError: a bad seq_length, an unknown task.json, or mlm=True without an MLM head.
    """
    path = os.fspath(path)
    for directory in (path, os.path.join(path, "model")):
        if tf.io.gfile.exists(os.path.join(directory, TASK_FILE)):
            source = _load_task_model(directory, seq_length)
            if mlm:
                raise ValueError(f"{directory} is a fine-tuned {source.info.get('task')} model: it has no masked-LM "
                                 f"head (export the pre-trained checkpoint for mlm).")
            return source
    return _load_encoder(path, seq_length, mlm)


def _load_task_model(directory, seq_length):
    from keras_bert.models import task_models  # noqa: F401  (registers the task model classes)

    with tf.io.gfile.GFile(os.path.join(directory, TASK_FILE)) as f:
        info = json.load(f)
    missing = [k for k in ("problem", "lower_case", "seq_length") if k not in info]
    if missing:
        raise ValueError(f"{os.path.join(directory, TASK_FILE)} lacks {missing}: write it with "
                         f"keras_bert.tasks.runner.save_task_model.")
    tokenizer = BertTokenizer(os.path.join(directory, info.get("vocab_file", "vocab.txt")),
                              lower_case=info["lower_case"])
    model = keras.saving.load_model(os.path.join(directory, info.get("model_file", "model.keras")))
    encoder = model.encoder
    return ExportSource(kind=info["problem"], tokenizer=tokenizer, encoder=encoder, model=model, info=info,
                        seq_length=_seq_length(seq_length or info["seq_length"], encoder), path=directory)


def _load_encoder(path, seq_length, mlm):
    from keras_bert.tasks.init_checkpoint import load_init_checkpoint

    init = load_init_checkpoint(path)
    pretrainer = _load_pretrainer(path, init) if mlm is not False else None
    if mlm and pretrainer is None:
        raise ValueError(f"{path} has no masked-LM head (cls/predictions); export it with mlm=None or False.")
    encoder = pretrainer.encoder if pretrainer is not None else init.encoder
    seq_length = _seq_length(seq_length or min(DEFAULT_SEQ_LENGTH, encoder.config.max_position_embeddings), encoder)
    info = {"task": None, "problem": "encoder", "seq_length": seq_length, "lower_case": init.lower_case,
            "text_inputs": ["text"], "checkpoint_format": init.format}
    return ExportSource(kind="encoder", tokenizer=BertTokenizer(init.vocabulary, lower_case=init.lower_case),
                        seq_length=seq_length, encoder=encoder, pretrainer=pretrainer, info=info, path=path)


def _load_pretrainer(path, init):
    """The checkpoint's `BertPretrainer` (encoder + masked-LM head), or None without heads."""
    from keras_bert import checkpoints
    from keras_bert.models.pretrainer import BertPretrainer
    from keras_bert.pretraining import run_dir

    if init.format == "pretraining_run":
        pretrainer = BertPretrainer(init.encoder, next_sentence=False)
        status = tf.train.Checkpoint(model=pretrainer).read(run_dir.find_checkpoint(path))
        status.expect_partial()  # The NSP head, the optimizer and the seeds are not read.
        try:
            status.assert_existing_objects_matched()
        except AssertionError:
            logging.info("%s: no masked-LM head in the checkpoint; exporting the encoder only.", path)
            return None
        return pretrainer
    try:
        return checkpoints.load_pretrainer(path, format=init.format)
    except checkpoints.CheckpointError as e:
        logging.info("%s: no masked-LM head (%s); exporting the encoder only.", path, e)
        return None


def _seq_length(seq_length, encoder):
    limit = encoder.config.max_position_embeddings
    if isinstance(seq_length, bool) or not isinstance(seq_length, int) or not 2 <= seq_length <= limit:
        raise ValueError(f"seq_length must be an int in [2, {limit}] (max_position_embeddings), got {seq_length!r}.")
    return seq_length
