"""Fine-tuned task model directories: `model.keras`, `task.json` and `vocab.txt`.

`keras_bert.tasks.finetuning` writes one as `<model_dir>/model/` at the end of a fine-tuning run;
`keras_bert.export` reads it back. task.json holds the task's name and facts (`task.info()`:
its `problem`, which picks the serving signatures, labels, text inputs...), the training
`seq_length`, the casing (`lower_case`) and the names of the two other files; when the run
gave them, a sample of its training texts (`training_texts.tsv`, one row of serving inputs per
line, tab-separated: int8 TFLite exports calibrate on it) and where its data came from
(`training_data`).

>>> save_task_model(
...     model, "runs/mrpc/model", task, 128, vocabulary, lower_case=True
... )  # doctest: +SKIP
>>> model, info, vocab_file = load_task_model("runs/mrpc/model")  # doctest: +SKIP
"""

import contextlib
import json
import os

import keras
import tensorflow as tf

import keras_bert
from keras_bert.checkpoints.adapters import save_adapters
from keras_bert.io_utils import atomic_directory
from keras_bert.text.vocab import write_vocabulary

TASK_FILE = "task.json"
MODEL_FILE = "model.keras"
VOCAB_NAME = "vocab.txt"
TRAINING_TEXTS_NAME = "training_texts.tsv"
_REQUIRED = ("problem", "lower_case", "seq_length")


def save_task_model(
    model,
    path,
    task,
    seq_length,
    vocabulary,
    lower_case,
    adapters=False,
    training_texts=None,
    training_data=None,
):
    """Writes `model.keras`, `task.json` and `vocab.txt` to `path` as one new directory.

    A model with LoRA (`keras_bert.models.lora`) is saved with its LoRA updates merged into the
    kernels: model.keras loads as a plain model.

    An existing directory at `path` is replaced whole (readers see the old or the new one).

    Args:
        model: the task model (a `keras_bert.models.task_models` class).
        path: str, the directory (local or gs://).
        task: the `keras_bert.tasks.definition.TaskDefinition` it was trained for (its `name` and
            `info()`).
        seq_length: int, the longest packed sequence of training.
        vocabulary: list[str], the WordPiece tokens.
        lower_case: bool, the tokenizer's casing.
        adapters: bool. Also write the LoRA weights and the head alone
            (`keras_bert.checkpoints.adapters.save_adapters`).
        training_texts: list of rows of texts (one text per serving input, in order), a sample
            of the training data, or None. Written as `training_texts.tsv` (tabs and line
            breaks inside a text become spaces); `read_training_texts` reads it back.
        training_data: str or None. Where the training data came from (recorded in task.json).

    Returns:
        str, `path`.
    """
    info = {
        "task": task.name,
        "seq_length": int(seq_length),
        "lower_case": bool(lower_case),
        "vocab_file": VOCAB_NAME,
        "model_file": MODEL_FILE,
        "model_class": type(model).__name__,
        "keras_bert_version": keras_bert.__version__,
        **task.info(),
    }
    if training_data is not None:
        info["training_data"] = str(training_data)
    if training_texts:
        info["training_texts_file"] = TRAINING_TEXTS_NAME
    with atomic_directory(path, replace=True) as tmp, _without_training_state(model):
        model.save(os.path.join(tmp, MODEL_FILE))  # Keras writes gs:// paths through tf.io.gfile.
        write_vocabulary(vocabulary, os.path.join(tmp, VOCAB_NAME))
        with tf.io.gfile.GFile(os.path.join(tmp, TASK_FILE), "w") as f:
            f.write(json.dumps(info, indent=1))
        if adapters:
            save_adapters(model, tmp)
        if training_texts:
            with tf.io.gfile.GFile(os.path.join(tmp, TRAINING_TEXTS_NAME), "w") as f:
                f.write("".join("\t".join(map(_one_line, row)) + "\n" for row in training_texts))
    return path


@contextlib.contextmanager
def _without_training_state(model):
    """`model` as a fine-tuned model is kept: without the optimizer, its state and the compile
    settings of the run that trained it (the runner compiles the task model itself), so that
    model.keras holds the model alone and loads uncompiled."""
    if not getattr(model, "compiled", False):
        yield
        return
    optimizer = model.optimizer
    model.optimizer, model.compiled = None, False
    try:
        yield
    finally:
        model.optimizer, model.compiled = optimizer, True


def _one_line(text):
    return " ".join(str(text).replace("\t", " ").splitlines())


def read_training_texts(directory, info):
    """The training texts sample `save_task_model` recorded: a list of rows (tuples of str), or
    None when the directory has none (written before they were recorded, or without them)."""
    name = info.get("training_texts_file")
    if not name:
        return None
    with tf.io.gfile.GFile(os.path.join(directory, name)) as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]


def find_task_model(path):
    """The task model directory at `path` or at `path`/model (a fine-tuning run directory), or
    None."""
    path = os.fspath(path)
    for directory in (path, os.path.join(path, "model")):
        if tf.io.gfile.exists(os.path.join(directory, TASK_FILE)):
            return directory
    return None


def require_task_model(path, name="model_dir"):
    """The task model directory at `path` or `path`/model, checked before anything loads.

    Args:
        path: str, what setting `name` gave (local or gs://).
        name: str, the setting, named in the errors.

    Returns:
        str, the directory holding task.json.

    Raises:
        FileNotFoundError: `path` does not exist.
        ValueError: `path` holds no task.json (a pre-trained checkpoint, not a fine-tuned model).
    """
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"{name}={path} does not exist; expected a fine-tuned model/ directory "
            f"(model.keras, {TASK_FILE}, {VOCAB_NAME}) or the fine-tuning run directory holding it."
        )
    directory = find_task_model(path)
    if directory is None:
        raise ValueError(
            f"{name}={path} is not a fine-tuned task model: it has no {TASK_FILE} (nor has "
            f"{path}/model). A pre-trained encoder has no task head; fine-tune it first "
            f"(keras-bert-finetune) and pass that run's model/ directory."
        )
    return directory


def read_task_info(directory):
    """The dict of `directory`/task.json (light: the model is not loaded)."""
    with tf.io.gfile.GFile(os.path.join(directory, TASK_FILE)) as f:
        return json.load(f)


def load_task_model(directory):
    """Reads a directory written by `save_task_model`.

    Args:
        directory: str (local or gs://).

    Returns:
        (model, info, vocab_file): the Keras task model, the dict of task.json and the path of
        its vocab.txt.

    Raises:
        ValueError: task.json lacks the problem, the casing or the sequence length.
    """
    task_file = os.path.join(directory, TASK_FILE)
    info = read_task_info(directory)
    missing = [k for k in _REQUIRED if k not in info]
    if missing:
        raise ValueError(
            f"{task_file} lacks {missing}: write it with "
            f"keras_bert.checkpoints.task_model.save_task_model."
        )
    model = keras.saving.load_model(os.path.join(directory, info.get("model_file", MODEL_FILE)))
    return model, info, os.path.join(directory, info.get("vocab_file", VOCAB_NAME))
