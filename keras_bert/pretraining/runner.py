"""The pre-training runner: `run_pretraining(config)` from TFRecords to a trained, evaluated model.

One code path for a laptop CPU, several GPUs, many workers or a TPU: the strategy comes from
`config.strategy`; the input pipeline is built per worker with `distribute_datasets_from_function`;
`fit` runs one Keras epoch per logging loop of `steps_per_loop` update steps. The run directory
(`model_dir`, local or gs://) holds checkpoints (`ckpt-<step>`), TensorBoard logs (`tensorboard/`),
`history.json`, `training_curve.png`, `summary.json`, and what the run's encoder needs to be used
later (`keras_bert.pretraining.run_dir`): `bert_config.json`, `vocab.txt` and `text_config.json`.
Running again with the same model_dir resumes from the newest checkpoint: same step, optimizer
state, learning rate and data position.
"""

import dataclasses
import json
import math
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert.config import BertConfig
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.pretraining import records, run_dir
from keras_bert.training import callbacks, checkpointing, distribute, optimizers, plots
from keras_bert.training.checkpointing import CheckpointError
from keras_bert.training.io_utils import write_atomic

PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass
class PretrainingConfig:
    """Settings of a pre-training run (the command-line flags have the same names).

    Args:
        model: str. A `BertConfig` preset name ("tiny" ... "large", "L-4_H-256").
        bert_config_file: str or None. An original `bert_config.json` (overrides `model`).
        bert_config: `BertConfig` or None (Python API; overrides both above).
        vocab_size: int or None. Replaces the preset's vocabulary size.
        train_files: str. Comma-separated TFRecord file patterns (local or gs://).
        eval_files: str or None. Held-out TFRecords for the final MLM/NSP accuracy.
        batch_size: int. GLOBAL batch size of one update step (all replicas, all micro-batches).
        seq_length: int. max_seq_length of the records.
        max_predictions_per_seq: int. Masked positions per record.
        num_train_steps: int. Update steps.
        num_warmup_steps: int. Linear-warmup update steps.
        learning_rate: float. Peak learning rate.
        optimizer: "adamw", "lamb" or "adam_weight_decay" (the original BERT optimizer).
        weight_decay: float. Decoupled weight decay (not on LayerNorm and bias).
        clip_norm: float. Global gradient norm clipping (0 for none).
        grad_accumulation_steps: int. Micro-batches of batch_size / this per update.
        strategy: "default", "mirrored", "multi_worker_mirrored" or "tpu".
        tpu: str or None. TPU name or address for strategy "tpu".
        mixed_precision: "none", "mixed_float16" (with dynamic loss scaling) or "mixed_bfloat16".
        jit_compile: bool. Compile the train step with XLA.
        steps_per_execution: int. Micro-steps run per `tf.function` call.
        steps_per_loop: int or None. Update steps per logging loop (default: the largest
            divisor of num_train_steps and checkpoint_every up to 100).
        model_dir: str. The run directory.
        checkpoint_every: int. Update steps between checkpoints (multiple of steps_per_loop).
        keep_checkpoints: int. Checkpoints kept.
        init_checkpoint: str or None. A Google TF1 checkpoint or Hugging Face directory to
            start from; its config replaces model / bert_config (the weights are overwritten
            when model_dir already holds a checkpoint to resume from).
        vocab_file: str or None. The vocabulary the training data was made with; copied into
            model_dir as vocab.txt (its size must equal the model's vocab_size).
        lower_case: bool or None. The casing of that tokenization, recorded in model_dir
            (text_config.json).
        next_sentence: bool. Train the NSP head (False: MLM only).
        seed: int. Seeds weights, dropout and data order.
        deterministic: bool. Reproducible data order (see `records.make_dataset`) and an exact
            data position on resume; False reads in parallel and re-seeds on resume.
        shuffle_buffer: int. Records in the shuffle buffer.
        eval_batch_size: int or None. Batch size of the evaluation (default batch_size).
        max_eval_steps: int or None. Limit of evaluation batches.
        verbose: bool. Progress bar.
        plot: bool. Write the training-curve PNG.
    """

    model: str = "base"
    bert_config_file: str = None
    bert_config: BertConfig = None
    vocab_size: int = None
    train_files: str = None
    eval_files: str = None
    batch_size: int = 256
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    num_train_steps: int = 1000
    num_warmup_steps: int = 100
    learning_rate: float = 1e-4
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    grad_accumulation_steps: int = 1
    strategy: str = "default"
    tpu: str = None
    mixed_precision: str = "none"
    jit_compile: bool = False
    steps_per_execution: int = 1
    steps_per_loop: int = None
    model_dir: str = None
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    init_checkpoint: str = None
    vocab_file: str = None
    lower_case: bool = None
    next_sentence: bool = True
    seed: int = 0
    deterministic: bool = True
    shuffle_buffer: int = 10000
    eval_batch_size: int = None
    max_eval_steps: int = None
    verbose: bool = True
    plot: bool = True

    def __post_init__(self):
        if not self.train_files:
            raise ValueError("train_files is required (TFRecord file patterns).")
        if not self.model_dir:
            raise ValueError("model_dir is required (checkpoints, logs and plots go there).")
        if self.mixed_precision not in PRECISIONS:
            raise ValueError(f"mixed_precision must be one of {PRECISIONS}, got {self.mixed_precision!r}.")
        for name in ("batch_size", "seq_length", "max_predictions_per_seq", "num_train_steps",
                     "grad_accumulation_steps", "steps_per_execution", "checkpoint_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise ValueError(f"num_warmup_steps {self.num_warmup_steps} must be in [0, num_train_steps "
                             f"{self.num_train_steps}].")
        if self.batch_size % self.grad_accumulation_steps:
            raise ValueError(f"batch_size {self.batch_size} is not divisible by grad_accumulation_steps "
                             f"{self.grad_accumulation_steps}.")
        if self.steps_per_loop is None:
            self.steps_per_loop = math.gcd(self.num_train_steps, self.checkpoint_every, 100)
        if self.num_train_steps % self.steps_per_loop or self.checkpoint_every % self.steps_per_loop:
            raise ValueError(f"steps_per_loop {self.steps_per_loop} must divide num_train_steps "
                             f"{self.num_train_steps} and checkpoint_every {self.checkpoint_every}.")
        if (self.steps_per_loop * self.grad_accumulation_steps) % self.steps_per_execution:
            raise ValueError(f"steps_per_execution {self.steps_per_execution} must divide the micro-steps of a "
                             f"loop ({self.steps_per_loop} x {self.grad_accumulation_steps}).")

    def resolve_bert_config(self):
        """The `BertConfig` chosen by bert_config / bert_config_file / model (+ vocab_size)."""
        if self.bert_config is not None:
            config = self.bert_config
        elif self.bert_config_file:
            config = BertConfig.from_json_file(self.bert_config_file)
        else:
            config = BertConfig.preset(self.model)
        return config.replace(vocab_size=self.vocab_size) if self.vocab_size else config


def build_pretrainer(config, bert_config):
    """A fresh `BertPretrainer` in the run's precision, or one loaded from `init_checkpoint`
    (a Google or Hugging Face checkpoint, whose own config then defines the architecture)."""
    dtype = "float32" if config.mixed_precision == "none" else config.mixed_precision
    if config.init_checkpoint:
        try:
            return BertPretrainer.from_checkpoint(config.init_checkpoint, next_sentence=config.next_sentence,
                                                  dtype=dtype)
        except CheckpointError as error:  # E.g. an encoder-only checkpoint: new heads on its encoder.
            logging.warning("init_checkpoint %s has no usable pre-training heads (%s); starting them fresh.",
                            config.init_checkpoint, error)
            encoder = BertEncoder.from_checkpoint(config.init_checkpoint, dtype=dtype)
            return BertPretrainer(encoder, next_sentence=config.next_sentence)
    return BertPretrainer(BertEncoder(bert_config, dtype=dtype), next_sentence=config.next_sentence)


def _train_dataset(config, strategy, start_step):
    """The training batches from the data position of `start_step`.

    Deterministic runs skip the batches already trained on (exact resume; the skipped
    records are read, which takes a while for very long runs); otherwise the stream is
    re-seeded with the step (fast resume, other batches than an uninterrupted run)."""
    micro_batch = config.batch_size // config.grad_accumulation_steps
    done = start_step * config.grad_accumulation_steps  # Micro-steps already trained.
    seed = config.seed if config.deterministic else config.seed + start_step

    def dataset_fn(context=None):
        per_pipeline = 1 if context is None else context.num_replicas_in_sync // context.num_input_pipelines
        return records.make_dataset(
            config.train_files, micro_batch, config.seq_length, config.max_predictions_per_seq,
            is_training=True, input_context=context, seed=seed, deterministic=config.deterministic,
            shuffle_buffer=config.shuffle_buffer, skip_batches=done * per_pipeline if config.deterministic else 0)

    if config.strategy == "default":
        return dataset_fn()
    if micro_batch % strategy.num_replicas_in_sync:
        raise ValueError(f"The micro-batch {micro_batch} is not divisible by the "
                         f"{strategy.num_replicas_in_sync} replicas.")
    return strategy.distribute_datasets_from_function(dataset_fn)


def _eval_dataset(config, strategy):
    """(dataset, steps): the held-out batches, read once; steps counted so that Keras never
    runs past the end (at the end of data it updates the loss trackers once more)."""
    batch = config.eval_batch_size or config.batch_size // config.grad_accumulation_steps
    static = isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.MultiWorkerMirroredStrategy))
    count = records.count_records(config.eval_files)
    steps = count // batch if static else -(-count // batch)
    if config.max_eval_steps:
        steps = min(steps, config.max_eval_steps)
    if steps < 1:
        raise ValueError(f"eval_files hold {count} records, fewer than one batch of {batch}.")

    def dataset_fn(context=None):
        return records.make_dataset(config.eval_files, batch, config.seq_length, config.max_predictions_per_seq,
                                    is_training=False, input_context=context, drop_remainder=static)

    if config.strategy == "default":
        return dataset_fn(), steps
    return strategy.distribute_datasets_from_function(dataset_fn), steps


def _load_history(path, start_step):
    if start_step and tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            return [h for h in json.load(f) if h["step"] <= start_step]
    return []


def run_pretraining(config=None, **overrides):
    """Pre-train (or resume pre-training) a BERT and evaluate it.

    Seeds Python's, NumPy's and TensorFlow's global generators with `config.seed` (weights,
    dropout). Resumes from the newest checkpoint in `model_dir` if there is one.

    Args:
        config: `PretrainingConfig`, or None to build one from `overrides`.
        **overrides: `PretrainingConfig` fields.

    Returns:
        dict: `steps` (final update step), `start_step` (where this call began), `final`
        (loss, mlm_loss, nsp_loss, accuracies of the last loop), `history` (one record per
        loop), `eval` (mlm_accuracy, nsp_accuracy, losses on eval_files; empty without),
        `examples_per_second`, `checkpoint` (path of the last checkpoint), `tensorboard_dir`,
        `plot` (PNG path or None), `model` (the trained `BertPretrainer`).
    """
    config = dataclasses.replace(config, **overrides) if config is not None else PretrainingConfig(**overrides)
    keras.utils.set_random_seed(config.seed)
    strategy = distribute.get_strategy(config.strategy, config.tpu)
    chief = distribute.is_chief(strategy)
    tf.io.gfile.makedirs(config.model_dir)
    bert_config = config.resolve_bert_config()

    with strategy.scope():
        model = build_pretrainer(config, bert_config)
        optimizer = optimizers.create_optimizer(
            config.learning_rate, config.num_train_steps, config.num_warmup_steps,
            variables=model.trainable_variables, optimizer=config.optimizer, weight_decay=config.weight_decay,
            clip_norm=config.clip_norm, grad_accumulation_steps=config.grad_accumulation_steps,
            loss_scale=config.mixed_precision == "mixed_float16")
        optimizer.build(model.trainable_variables)
        model.compile(optimizer=optimizer, jit_compile=config.jit_compile,
                      steps_per_execution=config.steps_per_execution)
        distribute.adapt_keras_model(model, strategy)
        checkpoint = checkpointing.TrainingCheckpoint(config.model_dir, model, optimizer,
                                                      max_to_keep=config.keep_checkpoints, strategy=strategy)
        start_step = checkpoint.restore_latest()
    if chief:  # After the restore: a checkpoint of another architecture fails before this.
        run_dir.write_run_files(config.model_dir, model.encoder.config, config.vocab_file, config.lower_case)
    if start_step % config.steps_per_loop:
        raise ValueError(f"The checkpoint in {config.model_dir} is at step {start_step}, not a multiple of "
                         f"steps_per_loop {config.steps_per_loop}; resume with the settings it was made with.")

    history_path = os.path.join(config.model_dir, "history.json")
    log_dir = os.path.join(config.model_dir, "tensorboard")
    log = callbacks.TrainingLog(config.num_train_steps, config.batch_size,
                                history=_load_history(history_path, start_step),
                                log_dir=os.path.join(log_dir, "train") if chief else None,
                                history_path=history_path if chief else None, verbose=config.verbose and chief)
    saver = callbacks.PeriodicCheckpoint(checkpoint, config.checkpoint_every, config.num_train_steps)
    if start_step < config.num_train_steps:
        model.fit(_train_dataset(config, strategy, start_step),
                  epochs=config.num_train_steps // config.steps_per_loop,
                  initial_epoch=start_step // config.steps_per_loop,
                  steps_per_epoch=config.steps_per_loop * config.grad_accumulation_steps,
                  callbacks=[log, saver], verbose=0, shuffle=False)
    step = int(optimizer.iterations.numpy())

    results = {}
    if config.eval_files:
        eval_data, eval_steps = _eval_dataset(config, strategy)
        results = model.evaluate(eval_data, steps=eval_steps, return_dict=True, verbose=0)
        results = {k: float(np.reshape(v, [-1])[0]) for k, v in results.items()}
        log.write_eval(step, results)
    plot = None
    if chief and config.plot and log.history:
        plot = plots.plot_history(log.history, os.path.join(config.model_dir, "training_curve.png"))
    new = [h for h in log.history if h["step"] > start_step]
    timed = new[1:] or new  # The first loop includes tracing and compilation.
    seconds = sum(h["seconds"] for h in timed)
    summary = {
        "steps": step,
        "start_step": start_step,
        "final": {k: v for k, v in (log.history[-1] if log.history else {}).items()
                  if k in callbacks.SCALARS or k == "learning_rate"},
        "eval": results,
        "examples_per_second": (sum(h["examples_per_second"] * h["seconds"] for h in timed) / seconds
                                if seconds else None),
        "checkpoint": saver.last_path or checkpoint.latest,
        "tensorboard_dir": log_dir,
        "plot": plot,
        "model_dir": config.model_dir,
    }
    if chief:
        write_atomic(os.path.join(config.model_dir, "summary.json"), json.dumps(summary, indent=1))
    summary["history"] = log.history
    summary["model"] = model
    return summary
