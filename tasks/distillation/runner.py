"""The distillation runner: the fine-tuning runner's steps with a teacher in the loss.

    run_distillation(teacher="runs/mrpc/model", student_layers=3, data_dir="glue/MRPC",
                     model_dir="runs/mrpc-3", do_train=True, do_eval=True)

Steps: load the teacher (`load_task_model`) and its tokenizer, read and encode the task's data
as fine-tuning does (`finetuning.load_splits`), add `unlabeled_file`'s inputs, build the student
(`students.build_student`), compile its `DistillTrainer` and restore the newest checkpoint, then
the fine-tuning runner's `train_and_finish` (epochs, best epoch, evaluation, predictions,
model/, summary); eval_results.json also holds the teacher's metrics under "teacher".
"""

import os
import time
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert.models import lora
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks import finetuning
from keras_bert.tasks.distillation.config import DistillConfig
from keras_bert.tasks.distillation.students import build_student
from keras_bert.tasks.distillation.trainer import GOLD, DistillTrainer
from keras_bert.training import run_skeleton


def run_distillation(config: DistillConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Distill the teacher into a student, evaluate and predict as `config` says; resumes from
    `model_dir`.

    Args:
        config: `DistillConfig`, or None to build one from `overrides`.
        **overrides: `DistillConfig` fields.

    Returns:
        dict: `run_finetuning`'s summary of the student (`eval`, `best`, `history`, `model`,
        `model_path`, ...) plus `teacher_eval` (the teacher's metrics on the same eval
        splits), `student_parameters` and `teacher_parameters`.
    """
    run = run_skeleton.start(DistillConfig, config, overrides)
    config, task = run.config, run.config.task_object
    teacher, info, tokenizer = _teacher_and_tokenizer(run)
    train, eval_sets = finetuning.load_splits(config, tokenizer)
    _check_labels(task, info)
    if train:
        train = (train[0], with_unlabeled(config, tokenizer, train[1]))
    plan = finetuning.plan_steps(config, train)
    with run.strategy.scope():
        student, pairs = build_student(config, task, teacher, tokenizer.vocabulary, run.dtype)
        trainer = DistillTrainer(
            task,
            student,
            teacher,
            info["problem"],
            temperature=config.temperature,
            alpha=config.alpha,
            hidden_weight=config.hidden_weight,
            attention_weight=config.attention_weight,
            layer_pairs=pairs,
        )
    run_skeleton.compile_and_restore(
        run,
        trainer,
        plan[1],
        int(plan[1] * config.warmup_proportion),
        run.path("checkpoints"),
        keras_model=trainer,
    )
    teacher_eval = {}

    def reference():
        teacher_eval.update(finetuning.evaluate_splits(config, teacher, run.strategy, eval_sets))
        logging.info("Teacher: %s", ", ".join(f"{k} {v:.4f}" for k, v in teacher_eval.items()))
        return {"teacher": dict(teacher_eval)}

    fields = {
        "teacher": config.teacher,
        "student_parameters": lora.count_parameters(student.weights),
        "teacher_parameters": lora.count_parameters(teacher.weights),
    }
    summary = finetuning.train_and_finish(
        run, student, trainer, tokenizer, train, eval_sets, plan, fields, reference
    )
    summary["teacher_eval"] = teacher_eval
    return summary


def _teacher_and_tokenizer(run):
    """(teacher task model, its task.json dict, its `BertTokenizer`); the teacher is loaded in
    the strategy's scope and checked against the run's seq_length."""
    from keras_bert.checkpoints.task_model import load_task_model, require_task_model
    from keras_bert.text.tokenizer import BertTokenizer

    config = run.config
    with run.strategy.scope():
        teacher, info, vocab_file = load_task_model(require_task_model(config.teacher, "teacher"))
    if not hasattr(teacher, "encoder"):
        raise ValueError(f"teacher={config.teacher} is not a keras_bert task model.")
    tokenizer = BertTokenizer(vocab_file, lower_case=bool(info["lower_case"]))
    config.task_object.check_vocabulary(tokenizer)
    limit = teacher.encoder.config.max_position_embeddings
    if config.seq_length > limit:
        raise ValueError(
            f"seq_length {config.seq_length} exceeds the teacher's max_position_embeddings {limit}."
        )
    return teacher, info, tokenizer


def _check_labels(task, info):
    """The task's labels (learned from the training file by text_classification) must be the
    teacher's: its head's outputs mean them."""
    labels = task.info().get("labels")
    if (
        info.get("labels") is not None
        and labels is not None
        and list(labels) != list(info["labels"])
    ):
        raise ValueError(
            f"The training data's labels {labels} differ from the teacher's {info['labels']}."
        )


def with_unlabeled(config, tokenizer, train):
    """The training FeatureSet with `GOLD` labels, and `unlabeled_file`'s inputs appended (their
    labels ignored: negative ids, or regression scores with GOLD 0)."""
    gold = np.ones([train.num_features], np.float32)
    if not config.unlabeled_file:
        return feature_lib.FeatureSet(train.inputs, {**train.labels, GOLD: gold})
    task = config.task_object
    started = time.perf_counter()
    examples = task.read_unlabeled(config.unlabeled_file)
    extra = task.encode(examples, tokenizer, config.seq_length, training=False)
    logging.info(
        "%s: %d unlabeled examples -> %d features in %.1f s",
        os.path.basename(config.unlabeled_file),
        len(examples),
        extra.num_features,
        time.perf_counter() - started,
    )
    inputs = {k: tf.concat([v, extra.inputs[k]], axis=0) for k, v in train.inputs.items()}
    labels = {k: _concat_ignored(v, extra) for k, v in train.labels.items()}
    labels[GOLD] = np.concatenate([gold, np.zeros([extra.num_features], np.float32)])
    return feature_lib.FeatureSet(inputs, labels)


def _concat_ignored(labels, extra):
    """`labels` followed by an ignored label for each of `extra`'s features: per-token labels
    `IGNORE_LABEL` on every token, per-feature ids -1, scores 0 (masked by GOLD)."""
    if isinstance(labels, tf.RaggedTensor):
        ignored = (
            tf.ones_like(extra.inputs["input_word_ids"], labels.dtype) * feature_lib.IGNORE_LABEL
        )
        return tf.concat([labels, ignored], axis=0)
    labels = np.asarray(labels)
    fill = 0 if labels.dtype.kind == "f" else -1
    return np.concatenate(
        [labels, np.full((extra.num_features,) + labels.shape[1:], fill, labels.dtype)]
    )
