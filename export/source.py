"""What an export starts from: a task model in memory, a fine-tuned task model directory, or a
pre-trained encoder.

`load_source(path)` takes a task model with its preprocessor (`BertClassifier.from_preset(...)`,
fitted: `model.task_info()` gives its task.json), or reads
- the `model/` directory that `keras_bert.tasks.finetune` writes (`model.keras`, `task.json`,
  `vocab.txt`), or the run directory holding it; the task's `problem` in task.json picks the
  serving signatures (`keras_bert.export.signatures.BUILDERS`);
- a fine-tuned Hugging Face directory (`BertForSequenceClassification`, ...:
  `keras_bert.checkpoints.hf_tasks`), its labels and tokenizer included;
- a pre-trained encoder with no task: a Google TF1 checkpoint, a Hugging Face directory or a
  pre-training run directory (`keras_bert.checkpoints.load_init_checkpoint`), exported as a
  feature extractor (kind "encoder"), with its masked-LM head when the checkpoint has one.
Both are read by `keras_bert.checkpoints`.
"""

import dataclasses
import os
from typing import Any

import keras
from absl import logging

from keras_bert import checkpoints
from keras_bert.checkpoints import hf_tasks, task_model
from keras_bert.models.task import BertTask
from keras_bert.tasks.registry import get_task
from keras_bert.text.tokenizer import BertTokenizer

DEFAULT_SEQ_LENGTH = 128  # For encoders (TF Hub's BERT preprocessors use 128 too).
# The export settings of a task model that records none (fine-tuned in Python, not by the
# runner, whose task.json has them): those of the task the runner fine-tunes for its problem.
DEFAULT_TASKS = {"span": "squad1", "multiple_choice": "swag"}


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
    model: keras.Model | None = None
    pretrainer: keras.Model | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    path: str = ""

    @property
    def text_inputs(self) -> tuple[str, ...]:
        """Names of the text inputs, e.g. ("text",) or ("text", "text_b")."""
        return tuple(self.info.get("text_inputs") or ("text",))


def load_source(
    path: str | os.PathLike[str],
    seq_length: int | None = None,
    mlm: bool | None = None,
    text_pair: bool | None = None,
) -> ExportSource:
    """Reads a task model directory or a pre-trained encoder (see the module docstring).

    Args:
        path: a task model with its preprocessor, or str: a fine-tuned `model/` directory (or
            its run directory), a fine-tuned Hugging Face directory, a Google checkpoint, a
            Hugging Face directory or a pre-training run directory.
        seq_length: int or None. Longest packed sequence (default: the task's training
            length from task.json; 128 for encoders). At most max_position_embeddings.
        mlm: bool or None. Load the masked-LM head of a pre-trained checkpoint: None if the
            checkpoint has one, True requires it, False skips it.
        text_pair: bool or None. A classifier (or regression) reads sentence pairs: its
            signatures take `text` and `text_b`. None: as the model says (a fine-tuned
            `model/`'s task.json, a model `fit` on pairs, a Hugging Face config.json's
            `finetuning_task`), else one text. A fine-tuned `model/` or a Hugging Face directory
            that says otherwise is an error; for a model in memory it replaces what it says.

    Returns:
        `ExportSource`.

    Raises:
        FileNotFoundError: nothing exportable at `path`.
        ValueError: a bad seq_length, an unknown task.json, mlm=True without an MLM head, or
            a text_pair the model disagrees with or that does not apply to its task.
    """
    if isinstance(path, keras.Model):
        return _with_text_pair(_in_memory(path, seq_length, mlm), text_pair)
    path = os.fspath(path)
    if os.path.isdir(path) and hf_tasks.architecture_of(path) is not None:
        pair = {} if text_pair is None else {"text_pair": text_pair}
        return _in_memory(BertTask.from_preset(path, **pair), seq_length, mlm, path=path)
    directory = task_model.find_task_model(path)
    if directory is not None:
        source = _load_task_model(directory, seq_length)
        if mlm:
            raise ValueError(
                f"{directory} is a fine-tuned {source.info.get('task')} model: it has no masked-LM "
                f"head (export the pre-trained checkpoint for mlm)."
            )
        return _check_text_pair(source, text_pair)
    if text_pair:
        raise ValueError(
            f"text_pair applies to sentence-pair classifiers; {path} is a pre-trained encoder."
        )
    return _load_encoder(path, seq_length, mlm)


def _with_text_pair(source, text_pair):
    """An in-memory classifier's source with text_pair's inputs (other tasks: checked)."""
    if text_pair is None or source.kind not in ("classification", "regression"):
        return _check_text_pair(source, text_pair)
    source.info["text_inputs"] = ["text", "text_b"] if text_pair else ["text"]
    source.info["text_pair"] = bool(text_pair)
    return source


def _check_text_pair(source, text_pair):
    """`source` unchanged, where text_pair is None or agrees with its text inputs.

    Raises:
        ValueError: it disagrees (naming what the model reads).
    """
    if text_pair is None or bool(text_pair) == (len(source.text_inputs) >= 2):
        return source
    raise ValueError(
        f"text_pair={text_pair} does not apply to {source.path}: a {source.kind} model that "
        f"reads {list(source.text_inputs)}."
    )


def _in_memory(model, seq_length, mlm, path=""):
    """The `ExportSource` of a task model with its preprocessor (`BertTask.task_info`)."""
    if not hasattr(model, "task_info"):
        raise TypeError(
            f"Expected a keras_bert task model or a directory, got a {type(model).__name__}."
        )
    if mlm:
        raise ValueError("A task model has no masked-LM head (export the pre-trained checkpoint).")
    info = model.task_info()
    if info["problem"] in DEFAULT_TASKS:
        info = {**get_task(DEFAULT_TASKS[info["problem"]]).info(), **info}
    seq_length = _seq_length(seq_length or info["seq_length"], model.encoder)
    if info["problem"] == "span":  # The question and the stride fit in the sequence.
        for key in ("max_query_length", "doc_stride"):
            info[key] = min(int(info[key]), seq_length // 2)
    return ExportSource(
        kind=info["problem"],
        tokenizer=model.preprocessor.tokenizer,
        encoder=model.encoder,
        model=model,
        info=info,
        seq_length=seq_length,
        path=path or f"<in-memory {type(model).__name__}>",
    )


def _load_task_model(directory, seq_length):
    model, info, vocab_file = task_model.load_task_model(directory)
    tokenizer = BertTokenizer(vocab_file, lower_case=info["lower_case"])
    encoder = model.encoder
    return ExportSource(
        kind=info["problem"],
        tokenizer=tokenizer,
        encoder=encoder,
        model=model,
        info=info,
        seq_length=_seq_length(seq_length or info["seq_length"], encoder),
        path=directory,
    )


def _load_encoder(path, seq_length, mlm):
    init = checkpoints.load_init_checkpoint(path)
    pretrainer = _load_pretrainer(path, init) if mlm is not False else None
    if mlm and pretrainer is None:
        raise ValueError(
            f"{path} has no masked-LM head (cls/predictions); export it with mlm=None or False."
        )
    encoder = pretrainer.encoder if pretrainer is not None else init.encoder
    seq_length = _seq_length(
        seq_length or min(DEFAULT_SEQ_LENGTH, encoder.config.max_position_embeddings), encoder
    )
    info = {
        "task": None,
        "problem": "encoder",
        "seq_length": seq_length,
        "lower_case": init.lower_case,
        "text_inputs": ["text"],
        "checkpoint_format": init.format,
    }
    return ExportSource(
        kind="encoder",
        tokenizer=BertTokenizer(init.vocabulary, lower_case=init.lower_case),
        seq_length=seq_length,
        encoder=encoder,
        pretrainer=pretrainer,
        info=info,
        path=path,
    )


def _load_pretrainer(path, init):
    """The checkpoint's `BertPretrainer` (encoder + masked-LM head), or None without heads."""
    try:
        return checkpoints.load_pretrainer(path, format=init.format)
    except checkpoints.CheckpointError as e:
        logging.info("%s: no masked-LM head (%s); exporting the encoder only.", path, e)
        return None


def _seq_length(seq_length, encoder):
    limit = encoder.config.max_position_embeddings
    if (
        isinstance(seq_length, bool)
        or not isinstance(seq_length, int)
        or not 2 <= seq_length <= limit
    ):
        raise ValueError(
            f"seq_length must be an int in [2, {limit}] (max_position_embeddings), got "
            f"{seq_length!r}."
        )
    return seq_length
