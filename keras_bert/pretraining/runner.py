"""The pre-training runner: `run_pretraining(config)` from TFRecords to a trained, evaluated model.

One code path for a laptop CPU, several GPUs, many workers or a TPU: on TensorFlow the strategy
comes from `config.strategy` and the input pipeline is built per worker with
`distribute_datasets_from_function`; on JAX the keras.distribution of `config.distribution`
splits each global batch of the one pipeline over the devices;
`fit` runs one Keras epoch per logging loop of `steps_per_loop` update steps. The run directory
(`model_dir`, local or gs://) holds checkpoints (`ckpt-<step>`), TensorBoard logs (`tensorboard/`),
`history.json`, `training_curve.png`, `summary.json`, and what the run's encoder needs to be used
later (`keras_bert.checkpoints.pretraining_run`): `bert_config.json`, `vocab.txt` and
    `text_config.json`.
Running again with the same model_dir resumes from the newest checkpoint: same step, optimizer
state, learning rate and data position.
"""

from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert import checkpoints
from keras_bert.checkpoints import pretraining_run
from keras_bert.errors import CheckpointError
from keras_bert.models.electra import ElectraPretrainer, with_original_ids
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.pretraining import records
from keras_bert.pretraining.config import PretrainingConfig
from keras_bert.training import callbacks, distribution, plots, run_skeleton
from keras_bert.training.memory import out_of_memory_hint


def build_pretrainer(config, bert_config):
    """A fresh `BertPretrainer` in the run's precision, or one loaded from `init_checkpoint`
    (a Google or Hugging Face checkpoint, whose own config then defines the architecture);
    packed (`BertPretrainer(packed=True)`) with `config.max_instances`. Objective "electra":
    an `ElectraPretrainer` whose discriminator is that encoder (its generator starts fresh),
    packed likewise."""
    if config.objective == "electra":
        return ElectraPretrainer(
            _build_encoder(config, bert_config),
            config.generator_size,
            seed=config.seed,
            packed=config.max_instances is not None,
        )
    pretrainer = _build_pretrainer(config, bert_config)
    if config.max_instances is None:
        return pretrainer
    packed = BertPretrainer(pretrainer.encoder, config.next_sentence, packed=True)
    packed.masked_lm_head.set_weights(pretrainer.masked_lm_head.get_weights())
    if config.next_sentence:
        packed.next_sentence_head.set_weights(pretrainer.next_sentence_head.get_weights())
    return packed


def _dtype(config):
    return "float32" if config.mixed_precision == "none" else config.mixed_precision


def _build_pretrainer(config, bert_config):
    dtype = _dtype(config)
    if config.init_checkpoint:
        try:
            return checkpoints.load_pretrainer(
                config.init_checkpoint, next_sentence=config.next_sentence, dtype=dtype
            )
        except (
            CheckpointError
        ) as error:  # E.g. an encoder-only checkpoint: new heads on its encoder.
            logging.warning(
                "init_checkpoint %s has no usable pre-training heads (%s); starting them fresh.",
                config.init_checkpoint,
                error,
            )
            encoder = checkpoints.load_encoder(config.init_checkpoint, dtype=dtype)
            return BertPretrainer(encoder, next_sentence=config.next_sentence)
    return BertPretrainer(BertEncoder(bert_config, dtype=dtype), next_sentence=config.next_sentence)


def _build_encoder(config, bert_config):
    """The `BertEncoder` of `init_checkpoint`, or a fresh one, in the run's precision."""
    dtype = _dtype(config)
    if config.init_checkpoint:
        return checkpoints.load_encoder(config.init_checkpoint, dtype=dtype)
    return BertEncoder(bert_config, dtype=dtype)


def _records(config, *args, **kwargs):
    """`records.make_dataset(*args, **kwargs)` as the objective's model takes the batches."""
    dataset = records.make_dataset(*args, **kwargs)
    if config.objective == "electra":
        return dataset.map(with_original_ids)
    return dataset


def _train_dataset(config, strategy, start_step):
    """The training batches from the data position of `start_step`.

    Deterministic runs skip the batches already trained on (exact resume; the skipped
    records are read, which takes a while for very long runs); otherwise the stream is
    re-seeded with the step (fast resume, other batches than an uninterrupted run)."""
    micro_batch = config.batch_size // config.grad_accumulation_steps
    done = start_step * config.grad_accumulation_steps  # Micro-steps already trained.
    seed = config.seed if config.deterministic else config.seed + start_step

    def dataset_fn(context=None):
        per_pipeline = (
            1 if context is None else context.num_replicas_in_sync // context.num_input_pipelines
        )
        return _records(
            config,
            config.train_files,
            micro_batch,
            config.seq_length,
            config.max_predictions_per_seq,
            is_training=True,
            input_context=context,
            seed=seed,
            deterministic=config.deterministic,
            shuffle_buffer=config.shuffle_buffer,
            skip_batches=done * per_pipeline if config.deterministic else 0,
            max_instances=config.max_instances,
        )

    if distribution.is_keras_distribution(strategy):  # JAX: Keras splits each global batch.
        distribution.check_batch(micro_batch, strategy, "The micro-batch")
        return dataset_fn()
    if config.strategy == "default":
        return dataset_fn()
    if micro_batch % strategy.num_replicas_in_sync:
        raise ValueError(
            f"The micro-batch {micro_batch} is not divisible by the "
            f"{strategy.num_replicas_in_sync} replicas."
        )
    return strategy.distribute_datasets_from_function(dataset_fn)


def _eval_dataset(config, strategy):
    """(dataset, steps): the held-out batches, read once; steps counted so that Keras never
    runs past the end (at the end of data it updates the loss trackers once more)."""
    batch = config.eval_batch_size or config.batch_size // config.grad_accumulation_steps
    static = isinstance(
        strategy, (tf.distribute.TPUStrategy, tf.distribute.MultiWorkerMirroredStrategy)
    ) or (distribution.is_keras_distribution(strategy) and strategy.num_replicas_in_sync > 1)
    if static and distribution.is_keras_distribution(strategy):
        distribution.check_batch(batch, strategy, "eval_batch_size")
    count = records.count_records(config.eval_files)
    steps = count // batch if static else -(-count // batch)
    if config.max_eval_steps:
        steps = min(steps, config.max_eval_steps)
    if steps < 1:
        raise ValueError(f"eval_files hold {count} records, fewer than one batch of {batch}.")

    def dataset_fn(context=None):
        return _records(
            config,
            config.eval_files,
            batch,
            config.seq_length,
            config.max_predictions_per_seq,
            is_training=False,
            input_context=context,
            drop_remainder=static,
            max_instances=config.max_instances,
        )

    if config.strategy == "default":  # And JAX (Keras splits each global batch).
        return dataset_fn(), steps
    return strategy.distribute_datasets_from_function(dataset_fn), steps


def _train_memory_hint(config):
    """What to change when a training step does not fit: a smaller micro-batch, same update."""
    micro_batch = config.batch_size // config.grad_accumulation_steps
    more = config.grad_accumulation_steps * 2
    if micro_batch % 2 == 0:
        return (
            f"keep batch_size {config.batch_size} and split each step into smaller micro-batches "
            f"with grad_accumulation_steps {more} (now {config.grad_accumulation_steps}, "
            f"micro-batches of {micro_batch}), or use a smaller batch_size or seq_length"
        )
    return "use a smaller batch_size (a multiple of grad_accumulation_steps) or seq_length"


def run_pretraining(config: PretrainingConfig | None = None, **overrides: Any) -> dict[str, Any]:
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
    run = run_skeleton.start(PretrainingConfig, config, overrides)
    config = run.config
    with run.strategy.scope():
        model = build_pretrainer(config, config.resolve_bert_config())
    run_skeleton.compile_and_restore(
        run,
        model,
        config.num_train_steps,
        config.num_warmup_steps,
        config.model_dir,
        grad_accumulation_steps=config.grad_accumulation_steps,
        steps_per_execution=config.steps_per_execution,
    )
    if run.chief:  # After the restore: a checkpoint of another architecture fails before this.
        _write_run_files(config, model)
    if run.start_step % config.steps_per_loop:
        raise ValueError(
            f"The checkpoint in {config.model_dir} is at step {run.start_step}, not a multiple of "
            f"steps_per_loop {config.steps_per_loop}; resume with the settings it was made with."
        )
    run_skeleton.start_log(run, config.num_train_steps, config.checkpoint_every)
    _train(run, model)
    results = _evaluate(run, model) if config.eval_files else {}
    last = run.log.history[-1] if run.log.history else {}
    summary = run_skeleton.summarize(
        run,
        {
            "final": {
                k: v for k, v in last.items() if k in callbacks.SCALARS or k == "learning_rate"
            },
            "eval": results,
            "checkpoint": run.saver.last_path or run.checkpoint.latest,
            "model_dir": config.model_dir,
        },
        plot=plots.plot_history,
    )
    summary["model"] = model
    summary["replicas"] = run.strategy.num_replicas_in_sync
    return summary


def _write_run_files(config, model):
    """What the run's encoder needs later
    (`keras_bert.checkpoints.pretraining_run.write_run_files`): its config, vocabulary, casing."""
    vocab_file, lower_case = config.vocab_file, config.lower_case
    # The init checkpoint's vocabulary and casing (by its format's rule), unless given: this run
    # is an init checkpoint too.
    if config.init_checkpoint:
        vocab_file = vocab_file or checkpoints.vocab_path(config.init_checkpoint)
        if lower_case is None:
            lower_case = checkpoints.casing(config.init_checkpoint)[0]
    pretraining_run.write_run_files(config.model_dir, model.encoder.config, vocab_file, lower_case)


def _train(run, model):
    """`fit` from the restored step to num_train_steps, one Keras epoch per logging loop."""
    config = run.config
    if run.start_step >= config.num_train_steps:
        return
    try:
        with out_of_memory_hint(
            "training", config.batch_size, config.seq_length, _train_memory_hint(config)
        ):
            model.fit(
                _train_dataset(config, run.strategy, run.start_step),
                epochs=config.num_train_steps // config.steps_per_loop,
                initial_epoch=run.start_step // config.steps_per_loop,
                steps_per_epoch=config.steps_per_loop * config.grad_accumulation_steps,
                callbacks=run.callbacks,
                verbose=0,
                shuffle=False,
            )
    finally:  # A failed fit leaves its bar open: log lines would redraw it.
        run.log.close()


def _evaluate(run, model):
    """MLM and NSP losses and accuracies on eval_files, also written to TensorBoard."""
    config = run.config
    eval_data, eval_steps = _eval_dataset(config, run.strategy)
    eval_batch = config.eval_batch_size or config.batch_size // config.grad_accumulation_steps
    with out_of_memory_hint(
        "evaluation", eval_batch, config.seq_length, "use a smaller eval_batch_size"
    ):
        results = model.evaluate(eval_data, steps=eval_steps, return_dict=True, verbose=0)
    results = {k: float(np.reshape(v, [-1])[0]) for k, v in results.items()}
    run.log.write_eval(run.step, results)
    return results
