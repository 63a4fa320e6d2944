"""Every task of the registry trains (a few steps, tiny model, tiny data in the task's own file
format), exports to a SavedModel and to TFLite (float), and answers raw text through both.

The default run takes the classification and token-classification kinds (task.json `problem`);
`slow` takes every task name. The regression, multiple-choice and span kinds' exports are checked
in the default run by their own tests (test_tflite's pair classifier and regression,
test_task_signatures, test_tflite_tasks), their runners by test_finetune, test_swag, test_squad.
A task added to `keras_bert.tasks.registry.TASKS` is covered here at once (its data writer goes
in `task_cases.py`).
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from finetune_cases import write_checkpoint
from task_cases import task_options, write_task_data

from keras_bert.export import tflite
from keras_bert.export.saved_model import export_saved_model
from keras_bert.tasks import registry
from keras_bert.tasks.finetuning import run_finetuning

SEQ_LENGTH = 32
# One task per kind; the default run takes the first two (about 60 s each on 2 cores, against
# 85-120 s for the others), `slow` the rest and every other task name.
ONE_PER_KIND = ("sst2", "conll2003", "stsb", "swag", "squad2")
DEFAULT_KINDS = ONE_PER_KIND[:2]
TEXTS = ["the movie was good .", "an awful plot"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_checkpoint(str(tmp_path_factory.mktemp("every_task") / "ckpt"))


def _inputs(specs):
    """Raw strings for a serving signature's string inputs ([B] or [B, K]), batch 2."""
    values = {}
    for name, spec in specs.items():
        shape = [2] + [int(d) for d in spec.shape[1:]]
        values[name] = np.resize(np.array(TEXTS, dtype=object), shape)
    return values


def _check_answer(kind, outputs):
    """The answer has the form of the task's kind: one per text, of the kind's own keys."""
    keys = {
        "classification": "label",
        "regression": "score",
        "token_classification": "entity_",
        "multiple_choice": "choice",
        "span": "answer",
    }
    assert outputs, kind
    assert any(key.startswith(keys[kind]) for key in outputs), (kind, sorted(outputs))
    for name, value in outputs.items():
        assert np.shape(value)[0] == 2, (kind, name, np.shape(value))


def _trains_exports_and_answers(task, checkpoint, tmp_path):
    data_dir = write_task_data(str(tmp_path / "data"), task)
    summary = run_finetuning(
        task=task,
        data_dir=data_dir,
        init_checkpoint=checkpoint,
        model_dir=str(tmp_path / "run"),
        do_train=True,
        do_eval=True,
        num_train_epochs=1,
        batch_size=8,
        seq_length=SEQ_LENGTH,
        learning_rate=1e-3,
        verbose=False,
        plot=False,
        task_options=task_options(task),
    )
    assert summary["steps"] >= 1 and summary["eval"], summary["eval"]
    model_dir = summary["model_path"]
    kind = registry.get_task(task).info()["problem"]

    serving = tf.saved_model.load(export_saved_model(model_dir, str(tmp_path / "serving")))
    function = serving.signatures["serving_default"]
    texts = _inputs(function.structured_input_signature[1])
    _check_answer(
        kind,
        {
            k: v.numpy()
            for k, v in function(**{k: tf.constant(v) for k, v in texts.items()}).items()
        },
    )

    path = tflite.export_tflite(model_dir, str(tmp_path / "tflite"))
    runner = tflite.load_interpreter(os.path.join(path, tflite.MODEL_FILE)).get_signature_runner(
        "serving_default"
    )
    _check_answer(kind, runner(**{k: tflite.as_strings(v) for k, v in texts.items()}))


@pytest.mark.parametrize("task", DEFAULT_KINDS)
def test_each_kind_trains_exports_and_answers(task, checkpoint, tmp_path):
    _trains_exports_and_answers(task, checkpoint, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("task", [t for t in registry.task_names() if t not in DEFAULT_KINDS])
def test_every_task_trains_exports_and_answers(task, checkpoint, tmp_path):
    _trains_exports_and_answers(task, checkpoint, tmp_path)


def test_the_default_run_covers_every_kind():
    kinds = {registry.get_task(t).info()["problem"] for t in registry.task_names()}
    assert (
        {registry.get_task(t).info()["problem"] for t in ONE_PER_KIND}
        == kinds
        == set(tflite.KINDS) - {"encoder"}
    )
