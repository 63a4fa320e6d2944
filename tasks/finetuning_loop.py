"""The fine-tuning runner's training loop (`keras_bert.tasks.finetuning`): the step plan, each
epoch's batches (split over the strategy's replicas; documents' windows for document-level
tasks), `fit`, the evaluation after each epoch and the best epoch's weights."""

import json
import math
import os

import tensorflow as tf
from absl import logging

from keras_bert.checkpoints.training import read_weight_values, read_weights, write_weights
from keras_bert.io_utils import write_atomic
from keras_bert.tasks import documents
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.long_text import document_level
from keras_bert.tasks.prediction import evaluate_splits
from keras_bert.training import distribution
from keras_bert.training.memory import out_of_memory_hint


def _steps_per_loop(config, steps_per_epoch):
    if config.steps_per_loop:
        if steps_per_epoch % config.steps_per_loop:
            raise ValueError(
                f"steps_per_loop {config.steps_per_loop} must divide the {steps_per_epoch} steps "
                f"of an epoch."
            )
        return config.steps_per_loop
    return max(d for d in range(1, min(100, steps_per_epoch) + 1) if steps_per_epoch % d == 0)


def _save_best(model, model_dir, step, epoch, metrics):
    """Writes the weights as `best-<step>/` and points `best.json` at them (atomically)."""
    path = os.path.join(model_dir, f"best-{step}", "weights")
    write_weights(model, path)
    write_atomic(
        os.path.join(model_dir, "best.json"),
        json.dumps({"step": step, "epoch": epoch, "path": path, "metrics": metrics}, indent=1),
    )
    for name in tf.io.gfile.listdir(model_dir):
        name = name.rstrip("/")
        if name.startswith("best-") and name != f"best-{step}":
            tf.io.gfile.rmtree(os.path.join(model_dir, name))


def _read_json(path, default):
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            return json.load(f)
    return default


def plan_steps(config, train, replicas=1):
    """(steps_per_epoch, num_train_steps, steps per logging loop) of the training data (its
    documents' batches for a document-level task, `replicas` packs each)."""
    steps_per_epoch = 1
    if train and document_level(config.task_object):
        budget = _window_budget(config, replicas)
        counts = documents.window_counts(train[1])
        steps_per_epoch = len(documents.document_plan(counts, budget, num_replicas=replicas))
    elif train:
        n = train[1].num_features
        steps_per_epoch = (
            n // config.batch_size if config.fixed_shapes else math.ceil(n / config.batch_size)
        )
        if steps_per_epoch < 1:
            raise ValueError(
                f"{n} training features are fewer than one batch of {config.batch_size}."
            )
    return (
        steps_per_epoch,
        steps_per_epoch * config.num_train_epochs,
        _steps_per_loop(config, steps_per_epoch),
    )


def train_epochs(run, model, trainer, train, eval_sets, eval_history, steps_per_epoch, loop):
    """Trains the remaining epochs; after each, the chief evaluates and keeps the best weights."""
    config = run.config
    _check_resume(run.start_step, loop)
    try:
        for epoch in range(run.start_step // steps_per_epoch, config.num_train_epochs):
            _train_epoch(run, trainer, train, epoch, steps_per_epoch, loop)
            if eval_sets and run.chief:  # Evaluation is local: other workers need not wait for it.
                _evaluate_epoch(run, model, eval_sets, eval_history, epoch)
            step = run.step
            if step % run.saver.every:  # PeriodicCheckpoint saved already on multiples of `every`.
                run.saver.last_path = run.checkpoint.save(step) or run.saver.last_path
    finally:  # A failed fit leaves its bar open: log lines would redraw it.
        run.log.close()


def _window_budget(config, replicas):
    """Windows per replica's batch of document-level training: batch_size over the replicas."""
    budget = config.batch_size // replicas
    documents.check_budget([config.task_object.options.max_windows], budget, "batch_size")
    return budget


def _document_data(run, train, epoch, done, steps_per_epoch, label_keys):
    """The training dataset of `epoch`'s document batches (`documents.document_plan`) from the
    `done`-th on, split over the strategy's replicas (one pack each)."""
    config, strategy = run.config, run.strategy
    replicas = strategy.num_replicas_in_sync
    budget = _window_budget(config, replicas)
    batches = documents.document_plan(
        documents.window_counts(train),
        budget,
        shuffle=True,
        seed=config.seed,
        epoch=epoch,
        num_replicas=replicas,
    )[done:steps_per_epoch]
    settings = dict(
        fixed=(budget, config.task_object.options.max_windows) if config.fixed_shapes else None,
        buckets=config.bucket_lengths(),
        label_keys=label_keys,
        targets=config.task_object.targets,
    )
    if replicas > 1 and distribution.is_keras_distribution(strategy):
        # JAX: every pack padded to the budget, the packs of a global batch side by side.
        settings["fixed"] = (budget, config.task_object.options.max_windows)
        first, last = strategy.process_share(replicas)  # Several hosts: this host's packs.
        return documents.concatenate_packs(
            documents.make_document_dataset(
                train, batches, replica_range=(first, last), **settings
            ),
            first,
            last - first,
            budget,
        )
    if replicas == 1 and not isinstance(strategy, tf.distribute.TPUStrategy):
        return documents.make_document_dataset(train, batches, **settings)

    def dataset_fn(context):
        per_pipeline = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * per_pipeline
        return documents.make_document_dataset(
            train, batches, replica_range=(first, first + per_pipeline), **settings
        )

    return strategy.distribute_datasets_from_function(dataset_fn)


def _train_epoch(run, trainer, train, epoch, steps_per_epoch, loop):
    """`fit` over the rest of `epoch`'s batch plan (all of it unless resumed inside it)."""
    config = run.config
    done = run.step - epoch * steps_per_epoch
    if document_level(config.task_object):
        data = _document_data(run, train, epoch, done, steps_per_epoch, _label_keys(run, trainer))
        _fit(run, trainer, data, epoch, steps_per_epoch, loop, done)
        return
    batches, padded = feature_lib.batch_plan(
        train.lengths,
        config.batch_size,
        shuffle=True,
        seed=config.seed,
        epoch=epoch,
        drop_remainder=config.fixed_shapes,
        buckets=config.bucket_lengths(),
    )
    batches, padded = batches[done:steps_per_epoch], padded[done:steps_per_epoch]
    data = _distribute(
        run.strategy,
        train,
        batches,
        padded,
        label_keys=_label_keys(run, trainer),
        targets=config.task_object.targets,
    )
    _fit(run, trainer, data, epoch, steps_per_epoch, loop, done)


def _label_keys(run, trainer):
    """The FeatureSet labels a training batch carries: the task's, or a wrapper's
    (`TrainingWrapper.label_keys`: distillation adds its own)."""
    return getattr(trainer, "label_keys", None) or run.config.task_object.label_keys


def _fit(run, trainer, data, epoch, steps_per_epoch, loop, done):
    """`trainer.fit` on `data`, the rest of `epoch` after its `done` steps."""
    config = run.config
    first_loop = epoch * steps_per_epoch // loop
    with out_of_memory_hint(
        "training",
        config.batch_size,
        config.seq_length,
        "use a smaller batch_size (e.g. 16) or seq_length",
    ):
        trainer.fit(
            data,
            epochs=(epoch + 1) * steps_per_epoch // loop,
            initial_epoch=first_loop + done // loop,
            steps_per_epoch=loop,
            callbacks=run.callbacks,
            verbose=0,
            shuffle=False,
        )


def _evaluate_epoch(run, model, eval_sets, eval_history, epoch):
    """Evaluates after `epoch`: eval_history.json, TensorBoard, and the best weights by the
    task's main metric (`_save_best`)."""
    config, task = run.config, run.config.task_object
    step = run.step
    metrics = evaluate_splits(config, model, run.strategy, eval_sets)
    eval_history.append({"epoch": epoch + 1, "step": step, **metrics})
    run.log.write_eval(step, metrics)
    logging.info(
        "epoch %d (step %d): %s",
        epoch + 1,
        step,
        ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()),
    )
    best = _read_json(os.path.join(config.model_dir, "best.json"), None)
    if best is None or metrics[task.main_metric] > best["metrics"][task.main_metric]:
        _save_best(model, config.model_dir, step, epoch + 1, metrics)
    write_atomic(run.path("eval_history.json"), json.dumps(eval_history, indent=1))


def restore_best(run, model):
    """The weights of the best epoch back in `model` (the chief reads them; on several JAX hosts
    every host gets the chief's); returns best.json (None off the chief)."""
    config, task = run.config, run.config.task_object
    best = _read_json(os.path.join(config.model_dir, "best.json"), None) if run.chief else None
    if distribution.several_hosts(run.strategy):  # Assigning is a collective: every host joins.
        values = best and read_weight_values(model, best["path"])
        distribution.assign_from_chief(model.weights, values)
    elif best is not None:
        read_weights(model, best["path"])
    if best is not None:
        logging.info(
            "Kept the model of epoch %d (step %d): %s %.4f",
            best["epoch"],
            best["step"],
            task.main_metric,
            best["metrics"][task.main_metric],
        )
    return best


def _check_resume(start_step, loop):
    if start_step % loop:
        raise ValueError(
            f"The checkpoint is at step {start_step}, not a multiple of the {loop} steps of a "
            f"logging loop; resume with the settings it was made with."
        )


def _distribute(strategy, feats, batches, padded, **labels):
    """The training dataset of a batch plan, split over the strategy's replicas (row r::R
    of each global batch to replica r, every replica padded to the global batch's length);
    `labels`: `make_dataset`'s label_keys and targets."""
    replicas = strategy.num_replicas_in_sync
    if distribution.is_keras_distribution(strategy):  # JAX: Keras splits each global batch.
        distribution.check_batch(len(batches[0]) if batches else replicas, strategy)
        local = strategy.process_batches(batches)  # Several hosts: this host's rows.
        return feature_lib.make_dataset(feats, local, padded, **labels)
    if replicas == 1 and not isinstance(strategy, tf.distribute.TPUStrategy):
        return feature_lib.make_dataset(feats, batches, padded, **labels)

    def dataset_fn(context):
        per_pipeline = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * per_pipeline
        return feature_lib.make_dataset(
            feats,
            batches,
            padded,
            num_replicas=replicas,
            replica_range=(first, first + per_pipeline),
            **labels,
        )

    return strategy.distribute_datasets_from_function(dataset_fn)
