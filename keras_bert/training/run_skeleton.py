"""The skeleton of a training run, shared by the pre-training and the fine-tuning runners.

    run = start(PretrainingConfig, config, overrides)    # settings, seed, strategy, model_dir
    with run.strategy.scope():
        model = ...                                       # the runner builds its model
    compile_and_restore(run, model, num_train_steps, num_warmup_steps, checkpoint_dir)
    start_log(run, num_train_steps, save_every)           # TrainingLog + PeriodicCheckpoint
    ... model.fit(..., callbacks=run.callbacks) ...       # the runner's own loop
    summary = summarize(run, {...}, plot_function)        # examples/s, plot, summary.json

A `TrainingSettings` config (`keras_bert.training.settings`) holds what all of this reads.
"""

import dataclasses
import json
import os

import keras
import tensorflow as tf

from keras_bert.checkpoints.training import training_checkpoint
from keras_bert.io_utils import write_atomic
from keras_bert.training import callbacks, distribution, optimizers, strategies


class Run:
    """The state of one training run that the runners share.

    Attributes:
        config: the run's `TrainingSettings` (overrides applied, "auto" settings resolved).
        strategy: the `tf.distribute.Strategy` (TensorFlow), or the
            `distribution.KerasDistribution` (JAX). chief: bool, True on the worker that writes.
        dtype: the Keras dtype policy of the encoder ("float32" without mixed precision).
        log_dir: the TensorBoard directory (`<model_dir>/tensorboard`).
        optimizer, checkpoint (`TrainingCheckpoint`), start_step (where this call began; the
        restored step): set by `compile_and_restore`.
        log (`callbacks.TrainingLog`), saver (`callbacks.PeriodicCheckpoint`): set by `start_log`.
    """

    def __init__(self, config, strategy, chief):
        self.config = config
        self.strategy = strategy
        self.chief = chief
        self.dtype = config.dtype
        self.log_dir = os.path.join(config.model_dir, "tensorboard")
        self.optimizer = self.checkpoint = self.log = self.saver = None
        self.start_step = 0

    @property
    def callbacks(self):
        """The callbacks of every `fit` of the run: the training log and the periodic saver."""
        return [self.log, self.saver]

    @property
    def step(self):
        """The optimizer's update step now."""
        return int(self.optimizer.iterations.numpy())

    def path(self, name):
        """`name` in the run directory."""
        return os.path.join(self.config.model_dir, name)


def start(config_class, config=None, overrides=None):
    """Sets a run up: the config with `overrides`, its local input paths checked, "auto"
    strategy and precision resolved; global seeds (Python, NumPy, the backend: weights,
    dropout), the strategy (TensorFlow) or keras.distribution (JAX), and model_dir made.

    Args:
        config_class: the `TrainingSettings` dataclass to build when `config` is None.
        config: a `config_class` instance, or None.
        overrides: dict of its fields to replace.

    Returns:
        `Run`.

    Raises:
        FileNotFoundError, NotADirectoryError: for a missing input path (see `check_paths`).
        ValueError: for a bad setting (the config's own checks), or the other backend's
            strategy / distribution flag.
    """
    overrides = overrides or {}
    config = (
        dataclasses.replace(config, **overrides)
        if config is not None
        else config_class(**overrides)
    )
    config.check_paths()
    distribution.check_backend(config.strategy, config.distribution)
    keras.utils.set_random_seed(config.seed)
    if keras.config.backend() == "jax":
        config = dataclasses.replace(
            config, mixed_precision=distribution.resolve_precision(config.mixed_precision)
        )
        strategy = distribution.get_distribution(config.distribution, config.model_parallel_devices)
        chief = strategy.is_chief
    else:
        config = dataclasses.replace(
            config, **strategies.resolve_auto(config.strategy, config.tpu, config.mixed_precision)
        )
        strategy = strategies.get_strategy(config.strategy, config.tpu)
        chief = strategies.is_chief(strategy)
    tf.io.gfile.makedirs(config.model_dir)
    return Run(config, strategy, chief)


def compile_and_restore(
    run,
    model,
    num_train_steps,
    num_warmup_steps,
    checkpoint_dir,
    keras_model=None,
    grad_accumulation_steps=1,
    steps_per_execution=1,
):
    """Creates the optimizer of the run's settings, compiles, and restores the newest checkpoint.

    Sets `run.optimizer`, `run.checkpoint` and `run.start_step` (0 without a checkpoint).

    Args:
        run: `Run`.
        model: the Keras model whose trainable variables train (built, in the strategy's scope).
        num_train_steps, num_warmup_steps: int. The learning-rate schedule's update steps.
        checkpoint_dir: str. Where the `TrainingCheckpoint` lives.
        keras_model: the model that is compiled, fit and checkpointed, when it wraps `model`
            (a fine-tuning `TrainingWrapper`); default `model`.
        grad_accumulation_steps: int. Micro-batches per update.
        steps_per_execution: int. Micro-steps per `tf.function` call.
    """
    config = run.config
    keras_model = keras_model or model
    with run.strategy.scope():
        optimizer = optimizers.create_optimizer(
            config.learning_rate,
            num_train_steps,
            num_warmup_steps,
            variables=model.trainable_variables,
            optimizer=config.optimizer,
            weight_decay=config.weight_decay,
            clip_norm=config.clip_norm,
            grad_accumulation_steps=grad_accumulation_steps,
            loss_scale=config.mixed_precision == "mixed_float16",
        )
        optimizer.build(model.trainable_variables)
        keras_model.compile(
            optimizer=optimizer,
            # JAX: always jit (an un-jitted JAX step runs op by op).
            jit_compile=config.jit_compile or keras.config.backend() == "jax",
            steps_per_execution=steps_per_execution,
        )
        if not distribution.is_keras_distribution(run.strategy):
            strategies.adapt_keras_model(keras_model, run.strategy)
        checkpoint = training_checkpoint(
            checkpoint_dir,
            keras_model,
            optimizer,
            max_to_keep=config.keep_checkpoints,
            strategy=run.strategy,
        )
        run.start_step = checkpoint.restore_latest()
    run.optimizer, run.checkpoint = optimizer, checkpoint


def start_log(run, num_train_steps, save_every):
    """The training log (history.json kept up to the restored step, TensorBoard scalars and
    the progress bar on the chief) and the saver of a checkpoint every `save_every` steps
    (and at `num_train_steps`): sets `run.log` and `run.saver`."""
    config = run.config
    history_path = run.path("history.json")
    run.log = callbacks.TrainingLog(
        num_train_steps,
        config.batch_size,
        history=callbacks.load_history(history_path, run.start_step),
        log_dir=os.path.join(run.log_dir, "train") if run.chief else None,
        history_path=history_path if run.chief else None,
        verbose=config.verbose and run.chief,
    )
    run.saver = callbacks.PeriodicCheckpoint(run.checkpoint, save_every, num_train_steps)


def summarize(run, fields, plot=None):
    """The run's summary, written to `summary.json` by the chief.

    Args:
        run: `Run` after training.
        fields: dict of the runner's own results (JSON-able), first in the summary.
        plot: function(history, path) -> path of the PNG it writes, or None for no plot.

    Returns:
        dict: `fields`, `steps` (the final update step), `start_step`, `examples_per_second`
        (over the loops of this call, the first one left out: it includes tracing),
        `tensorboard_dir`, `plot` (PNG path or None) and, not written, `history`.
    """
    history = run.log.history
    plot_path = None
    if run.chief and plot is not None and run.config.plot and history:
        plot_path = plot(history, run.path("training_curve.png"))
    new = [h for h in history if h["step"] > run.start_step]
    timed = new[1:] or new  # The first loop includes tracing and compilation.
    seconds = sum(h["seconds"] for h in timed)
    summary = {
        **fields,
        "steps": run.step,
        "start_step": run.start_step,
        "examples_per_second": (
            sum(h["examples_per_second"] * h["seconds"] for h in timed) / seconds
            if seconds
            else None
        ),
        "tensorboard_dir": run.log_dir,
        "plot": plot_path,
    }
    if run.chief:
        write_atomic(run.path("summary.json"), json.dumps(summary, indent=1))
    summary["history"] = history
    return summary
