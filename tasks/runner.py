"""The fine-tuning runner: one code path for every task (paper §4, §5.3). Its settings are a
`FinetuneConfig` (`keras_bert.tasks.config`); its command line is `keras_bert.tasks.finetune`:

    python -m keras_bert.tasks.finetune --task=mrpc --data_dir=glue/MRPC \\
        --init_checkpoint=uncased_L-12_H-768_A-12/ --model_dir=runs/mrpc --do_train --do_eval \\
        --do_predict

What a run writes under `--model_dir` (checkpoints, best epoch, eval_results.json, predictions/,
model/, TensorBoard logs, plot) is listed in that command line's docstring, its --help.
"""

import json
import math
import os
import time
import weakref
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert.checkpoints import hf_tasks
from keras_bert.checkpoints.task_model import find_task_model, save_task_model
from keras_bert.checkpoints.training import read_weight_values, read_weights, write_weights
from keras_bert.io_utils import write_atomic
from keras_bert.models import lora
from keras_bert.tasks import documents, quantization_aware
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.long_text import document_level
from keras_bert.tasks.trainer import TaskTrainer
from keras_bert.training import callbacks, distribution, plots
from keras_bert.training import run as training_run
from keras_bert.training.memory import out_of_memory_hint

LORA_FILE = "lora.json"  # The run's LoRA settings (`_lora_settings`).
QUANTIZATION_AWARE_FILE = "quantization_aware.json"  # Written by quantization-aware runs.


def _load_encoder(config, dtype):
    """(encoder, vocabulary, lower_case, fine-tuned task model or None) from init_checkpoint
    (a fine-tuned model/ of the same task: its encoder, and its model whose head
    `_build_and_compile` copies), or a fresh preset encoder."""
    from keras_bert.checkpoints import load_init_checkpoint
    from keras_bert.text.vocab import load_vocabulary

    if config.init_checkpoint and find_task_model(config.init_checkpoint):
        return _fine_tuned(config, find_task_model(config.init_checkpoint))
    if config.init_checkpoint:
        init = load_init_checkpoint(
            config.init_checkpoint,
            vocab_file=config.vocab_file,
            lower_case=config.lower_case,
            dtype=dtype,
        )
        return init.encoder, init.vocabulary, init.lower_case, None
    from keras_bert import BertConfig, BertEncoder

    vocabulary = load_vocabulary(config.vocab_file)
    bert_config = BertConfig.preset(config.model, vocab_size=len(vocabulary))
    lower_case = True if config.lower_case is None else config.lower_case
    return BertEncoder(bert_config, dtype=dtype), vocabulary, lower_case, None


def _fine_tuned(config, directory):
    """`_load_encoder` of a fine-tuned model/ `directory`: its task must be the run's (the head
    carries over); its vocabulary and casing are used."""
    from keras_bert.checkpoints.task_model import load_task_model
    from keras_bert.text.vocab import load_vocabulary

    model, info, vocab_file = load_task_model(directory)
    if info.get("task") != config.task_object.name:
        raise ValueError(
            f"init_checkpoint={config.init_checkpoint} is a model fine-tuned on "
            f"{info.get('task')!r}, not on {config.task_object.name!r}: continue a model of the "
            f"same task, or start from its pre-trained checkpoint."
        )
    vocabulary = load_vocabulary(config.vocab_file or vocab_file)
    return model.encoder, vocabulary, info["lower_case"], model


def _copy_head(model, tuned):
    """The fine-tuned model `tuned`'s weights into the task model built around its encoder."""
    weights = tuned.get_weights()
    if [w.shape for w in weights] != [tuple(v.shape) for v in model.weights]:
        raise ValueError(
            "init_checkpoint's fine-tuned model does not fit this run's task model (another "
            "head): start from its pre-trained checkpoint."
        )
    model.set_weights(weights)


CALIBRATION_SAMPLE = 300  # Training texts recorded in model/ (int8 TFLite calibrates on them).


def serving_rows(task, examples, limit=CALIBRATION_SAMPLE):
    """`task.serving_row` of up to `limit` examples spread evenly over `examples`."""
    step = max(1, len(examples) // limit)
    return [task.serving_row(example) for example in examples[::step][:limit]]


def _read(config, split, limit):
    task = config.task_object
    file = (
        config.train_file
        if split == task.train_split
        else config.eval_file
        if split in task.eval_splits
        else None
    )
    examples = task.read(config.data_dir, split, use_tfds=config.tfds, file=file)
    return examples[:limit] if limit else examples


def _steps_per_loop(config, steps_per_epoch):
    if config.steps_per_loop:
        if steps_per_epoch % config.steps_per_loop:
            raise ValueError(
                f"steps_per_loop {config.steps_per_loop} must divide the {steps_per_epoch} steps "
                f"of an epoch."
            )
        return config.steps_per_loop
    return max(d for d in range(1, min(100, steps_per_epoch) + 1) if steps_per_epoch % d == 0)


def predict(model, task, features, batch_size, buckets=None, strategy=None, jit_compile=False):
    """The task model's outputs on every feature, in feature order.

    Batches are sorted by length and padded as in training. Outputs a task lists in
    `token_outputs` ([B, S, ...]) come back as a list of one array per feature, cut to its
    tokens; the others as one array [N, ...]. A document-level model
    (`long_text.document_level`) gives `logits` per example [N_examples, C] instead, from
    batches of whole documents of at most `batch_size` windows.
    """
    if document_level(task):
        return _predict_documents(model, task, features, batch_size, buckets, strategy, jit_compile)
    fixed = bool(buckets) and (
        jit_compile or is_jax() or isinstance(strategy, tf.distribute.TPUStrategy)
    )
    batches, padded = feature_lib.batch_plan(features.lengths, batch_size, buckets=buckets)
    data = feature_lib.make_dataset(
        features, batches, padded, pad_batch_to=batch_size if fixed else None, label_keys=()
    )
    call = _predict_function(model, strategy, jit_compile)
    token_outputs = set(getattr(task, "token_outputs", ()))
    lengths = features.lengths
    collected = {}
    for index, (x, _) in zip(batches, data):
        out = call(x)
        if isinstance(strategy, tf.distribute.TPUStrategy):  # Every replica ran the whole batch.
            out = {k: strategy.experimental_local_results(v)[0] for k, v in out.items()}
        for name, value in out.items():
            value = np.asarray(keras.ops.convert_to_numpy(value))[: len(index)]
            rows = collected.setdefault(name, [None] * features.num_features)
            for row, i in enumerate(index):
                rows[i] = value[row, : lengths[i]] if name in token_outputs else value[row]
    return {k: v if k in token_outputs else np.stack(v) for k, v in collected.items()}


def _predict_documents(model, task, features, batch_size, buckets, strategy, jit_compile):
    """`predict` of a document-level model (`documents.predict_documents`)."""
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    inner = _predict_function(model, strategy, jit_compile)

    def call(x):
        out = inner(x)
        if tpu:  # Every replica ran the whole batch.
            return {k: strategy.experimental_local_results(v)[0].numpy() for k, v in out.items()}
        return {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in out.items()}

    return documents.predict_documents(
        call,
        features,
        batch_size,
        buckets=buckets,
        fixed=bool(buckets) and (jit_compile or tpu or is_jax()),
        max_windows=task.options.max_windows,
    )


_PREDICT_FUNCTIONS: weakref.WeakKeyDictionary[keras.Model, dict[Any, Any]] = (
    weakref.WeakKeyDictionary()
)  # model -> {(strategy id, jit_compile): tf.function}


def _predict_function(model, strategy, jit_compile):
    """The model's inference `tf.function`, made once per model (XLA compiles a bucket's shape once
    over all epochs' evaluations). On TPU it runs through `strategy.run`; on JAX it is a
    `jax.jit` program (`_jax_predict_function`)."""
    cache = _PREDICT_FUNCTIONS.setdefault(model, {})
    key = (id(strategy), jit_compile)
    if key not in cache and is_jax():
        cache[key] = _jax_predict_function(model)
    if key not in cache:

        def infer(x):
            return model(x, training=False)

        call = tf.function(infer, jit_compile=jit_compile, reduce_retracing=not jit_compile)
        if isinstance(strategy, tf.distribute.TPUStrategy):

            def replicated(x, inner=call):
                return strategy.run(inner, args=(x,))

            call = tf.function(replicated)
        cache[key] = call
    return cache[key]


def is_jax():
    """True on the JAX backend."""
    return keras.config.backend() == "jax"


def _jax_predict_function(model):
    """The model's inference as one `jax.jit` program per input shape (its variables passed in,
    so later training is seen), run on the current keras.distribution's devices."""
    import jax

    def infer(trainable, non_trainable, x):
        outputs, _ = model.stateless_call(trainable, non_trainable, x, training=False)
        return outputs

    jitted = jax.jit(infer)

    def call(x):
        return jitted(
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            {k: np.asarray(v) for k, v in x.items()},
        )

    return call


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


def evaluate_splits(config, model, strategy, eval_sets):
    """Metrics of every eval split, suffixed as the task names them (MNLI: _matched ...)."""
    task = config.task_object
    metrics = {}
    for split, (examples, feats) in eval_sets.items():
        outputs = _predict_or_explain(config, model, feats, strategy)
        for name, value in task.evaluate(examples, feats, outputs).items():
            metrics[name + task.eval_splits[split]] = float(value)
    return metrics


def _predict_or_explain(config, model, feats, strategy):
    """`predict` with the run's settings; out of memory names eval_batch_size."""
    with out_of_memory_hint(
        "evaluation", config.eval_batch_size, config.seq_length, "use a smaller eval_batch_size"
    ):
        return predict(
            model,
            config.task_object,
            feats,
            config.eval_batch_size,
            config.bucket_lengths(),
            strategy,
            config.jit_compile,
        )


def run_finetuning(config: FinetuneConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Fine-tune, evaluate and predict as `config` says; resumes from `model_dir`.

    The steps: load the encoder and tokenizer, read and encode the data, build and compile
    (restoring the newest checkpoint), train the epochs (evaluating each, keeping the best),
    restore the best, evaluate, predict, save the task model, summarize.

    Args:
        config: `FinetuneConfig`, or None to build one from `overrides`.
        **overrides: `FinetuneConfig` fields.

    Returns:
        dict: `eval` (metrics of the kept model), `steps`, `start_step`, `best` (its epoch,
        step and metrics), `history` (training loops), `eval_history` (per epoch),
        `predictions` (written files), `model_path`, `examples_per_second`,
        `trainable_parameters` (fewer than `full_finetuning_parameters` with LoRA), `model` (the
        trained task model).
    """
    run = training_run.start(FinetuneConfig, config, overrides)
    encoder, tokenizer, tuned = _encoder_and_tokenizer(run)
    train, eval_sets = load_splits(run.config, tokenizer)
    plan = plan_steps(run.config, train, run.strategy.num_replicas_in_sync)
    model, trainer = _build_and_compile(run, encoder, plan[1], train, tuned)
    fields = {
        "trainable_parameters": lora.count_parameters(model.trainable_weights),
        "full_finetuning_parameters": lora.full_finetuning_parameters(model),
    }
    return train_and_finish(run, model, trainer, tokenizer, train, eval_sets, plan, fields)


def load_splits(config, tokenizer):
    """(train, eval_sets): the training split's (examples, FeatureSet) if do_train (else None),
    and {split: (examples, FeatureSet)} of the eval splits if do_train or do_eval. Training is
    read first: a task may learn its label set there (text_classification) and check dev
    against it."""
    task = config.task_object
    train = (
        _load(config, tokenizer, task.train_split, config.max_train_examples)
        if config.do_train
        else None
    )
    eval_sets = (
        {s: _load(config, tokenizer, s, config.max_eval_examples) for s in task.eval_splits}
        if (config.do_eval or config.do_train)
        else {}
    )
    return train, eval_sets


def train_and_finish(
    run, model, trainer, tokenizer, train, eval_sets, plan, fields, reference=None
):
    """The steps after compiling, shared by fine-tuning and distillation: train the remaining
    epochs (evaluating each, keeping the best), restore the best, evaluate, predict, save the
    task model, summarize.

    Args:
        run: the `training_run.Run`, compiled and restored (`compile_and_restore`).
        model: the task model that is evaluated, saved and exported.
        trainer: the compiled `TaskTrainer` (or subclass) that `fit` trains.
        tokenizer: `BertTokenizer`.
        train: (examples, FeatureSet) or None. eval_sets: {split: (examples, FeatureSet)}.
        plan: `plan_steps`'s (steps_per_epoch, num_train_steps, loop).
        fields: dict of the runner's own summary fields.
        reference: function() -> dict of more eval_results.json entries (the teacher's
            metrics of a distillation), called once when the final evaluation is written.

    Returns:
        the summary dict of `run_finetuning`.
    """
    config, task = run.config, run.config.task_object
    steps_per_epoch, num_train_steps, loop = plan
    every = config.checkpoint_every or steps_per_epoch
    training_run.start_log(run, num_train_steps, max(loop, every // loop * loop))
    eval_history = callbacks.load_history(run.path("eval_history.json"), run.start_step)
    if train and run.start_step < num_train_steps:
        _train_epochs(run, model, trainer, train[1], eval_sets, eval_history, steps_per_epoch, loop)
    best = _restore_best(run, model)
    results = (
        _final_evaluation(run, model, eval_sets, best, reference)
        if config.do_eval and eval_sets and run.chief
        else {}
    )
    written = _write_predictions(run, model, tokenizer) if config.do_predict and run.chief else []
    model_path = None
    if run.chief:
        model_path = save_task_model(
            model,
            run.path("model"),
            task,
            config.seq_length,
            tokenizer.vocabulary,
            tokenizer.lower_case,
            adapters=config.save_adapters,
            training_texts=serving_rows(task, train[0]) if train else None,
            training_data=config.train_file or (config.data_dir and f"{config.data_dir} (train)"),
        )
        if config.save_hf:
            hf_tasks.save_task(
                model,
                run.path("hf"),
                tokenizer.vocabulary,
                tokenizer.lower_case,
                labels=task.info().get("labels"),
                overwrite=True,
                text_pair=len(task.info().get("text_inputs") or ()) == 2,
            )
    summary = training_run.summarize(
        run,
        {
            "task": task.name,
            "eval": results,
            "best": best,
            "eval_history": eval_history,
            "predictions": written,
            "model_path": model_path,
            **fields,
        },
        plot=lambda history, path: _plot(history, eval_history, task.name, path),
    )
    summary["model"] = model
    summary["replicas"] = run.strategy.num_replicas_in_sync
    return summary


def _encoder_and_tokenizer(run):
    """(encoder, tokenizer, fine-tuned model or None): the encoder in the strategy's scope, and
    the tokenizer of its vocabulary and casing, checked against the task and the run's
    seq_length (see `_load_encoder`)."""
    from keras_bert.text.tokenizer import BertTokenizer

    config = run.config
    with run.strategy.scope():
        encoder, vocabulary, lower_case, tuned = _load_encoder(config, run.dtype)
    tokenizer = BertTokenizer(vocabulary, lower_case=lower_case)
    config.task_object.check_vocabulary(tokenizer)
    if config.lora_rank is not None:  # Before training writes anything to model_dir.
        lora.check_rank(config.lora_rank, encoder.config.hidden_size)
    if config.seq_length > encoder.config.max_position_embeddings:
        raise ValueError(
            f"seq_length {config.seq_length} exceeds the model's max_position_embeddings "
            f"{encoder.config.max_position_embeddings}."
        )
    return encoder, tokenizer, tuned


def _load(config, tokenizer, split, limit):
    """(examples, FeatureSet) of `split`, its first `limit` examples if given."""
    task = config.task_object
    started = time.perf_counter()
    examples = _read(config, split, limit)
    feats = task.encode(examples, tokenizer, config.seq_length, training=split == task.train_split)
    logging.info(
        "%s %s: %d examples -> %d features in %.1f s",
        task.name,
        split,
        len(examples),
        feats.num_features,
        time.perf_counter() - started,
    )
    return examples, feats


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


def _build_and_compile(run, encoder, num_train_steps, train=None, tuned=None):
    """(task model, its `TaskTrainer`), compiled, the newest checkpoint restored; the head of
    `tuned` (a fine-tuned task model around `encoder`) copied; with lora_rank, LoRA on the
    encoder (the rest of it frozen) before the optimizer is made; with quantization_aware, a
    `QuantizationAwareTrainer` whose ranges start from the first batch of `train` (examples,
    FeatureSet)."""
    config, task = run.config, run.config.task_object
    rank, alpha = _lora_settings(run)
    with run.strategy.scope():
        model = task.build_model(encoder, config.dropout)
        if tuned is not None:
            _copy_head(model, tuned)
        if rank is not None:
            lora.enable_lora(encoder, rank, alpha)
        if _quantization_aware(run) and train:
            trainer = quantization_aware.QuantizationAwareTrainer(task, model)
            trainer.initialize_ranges(quantization_aware.first_batch(config, train[1]))
        else:
            trainer = TaskTrainer(task, model)
    trainable = lora.count_parameters(model.trainable_weights)
    full = lora.full_finetuning_parameters(model)
    logging.info(
        "Trainable parameters: %d of full fine-tuning's %d (%.2f%%)",
        trainable,
        full,
        100 * trainable / full,
    )
    training_run.compile_and_restore(
        run,
        model,
        num_train_steps,
        int(num_train_steps * config.warmup_proportion),
        run.path("checkpoints"),
        keras_model=trainer,
    )
    return model, trainer


def _lora_settings(run):
    """(lora_rank, lora_alpha) of the run, kept in `<model_dir>/lora.json` from its first start:
    a run resumed without --lora_rank restores its LoRA model; other LoRA settings than the
    recorded ones are an error (the checkpoints would not fit)."""
    config, path = run.config, run.path(LORA_FILE)
    given = {"lora_rank": config.lora_rank, "lora_alpha": config.lora_alpha}
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            recorded = json.load(f)
        if config.lora_rank is None:
            given = recorded
        elif recorded != given:
            raise ValueError(
                f"{config.model_dir} holds a run with {recorded}, not {given}: resume it with its "
                f"own settings, or use another model_dir."
            )
    elif run.chief:
        write_atomic(path, json.dumps(given))
    return given["lora_rank"], given["lora_alpha"]


def _quantization_aware(run):
    """The run's quantization_aware, kept in `<model_dir>/quantization_aware.json` from the first
    start of a quantization-aware run: resuming it without the flag (its checkpoints hold the
    activation ranges) is an error naming it."""
    path = run.path(QUANTIZATION_AWARE_FILE)
    if tf.io.gfile.exists(path) and not run.config.quantization_aware:
        raise ValueError(
            f"{run.config.model_dir} holds a quantization-aware run: resume it with "
            f"quantization_aware (--quantization_aware), or use another model_dir."
        )
    if run.config.quantization_aware and run.chief and not tf.io.gfile.exists(path):
        write_atomic(path, json.dumps({"quantization_aware": True}))
    return run.config.quantization_aware


def _train_epochs(run, model, trainer, train, eval_sets, eval_history, steps_per_epoch, loop):
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
        data = _document_data(run, train, epoch, done, steps_per_epoch, trainer.label_keys)
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
    data = _distribute(run.strategy, train, batches, padded, trainer.label_keys)
    _fit(run, trainer, data, epoch, steps_per_epoch, loop, done)


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


def _restore_best(run, model):
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


def _final_evaluation(run, model, eval_sets, best, reference=None):
    """The metrics of the kept model (the best epoch's, or evaluated now), in eval_results.json
    (with `reference()`'s entries after them)."""
    config, task = run.config, run.config.task_object
    results = (
        best["metrics"]
        if best is not None and config.do_train
        else evaluate_splits(config, model, run.strategy, eval_sets)
    )
    record = {
        "task": task.name,
        "split": ",".join(eval_sets),
        "step": best["step"] if best else run.step,
        "epoch": best["epoch"] if best else None,
        **results,
        **(reference() if reference is not None else {}),
    }
    write_atomic(run.path("eval_results.json"), json.dumps(record, indent=1))
    return results


def _write_predictions(run, model, tokenizer):
    """The task's prediction files of its predict splits in `predictions/`; returns their paths."""
    config, task = run.config, run.config.task_object
    out_dir = run.path("predictions")
    tf.io.gfile.makedirs(out_dir)
    written = []
    for split in task.predict_splits:
        examples, feats = _load(config, tokenizer, split, None)
        outputs = _predict_or_explain(config, model, feats, run.strategy)
        written += task.write_predictions(split, examples, feats, outputs, out_dir)
    return written


def _plot(history, eval_history, task_name, path):
    """Training loss, the dev metrics of each epoch and the learning rate against the step."""
    metric_names = [
        k for k in (eval_history[-1] if eval_history else {}) if k not in ("step", "epoch")
    ]
    points = history + [
        {"step": e["step"], **{f"dev {k}": e[k] for k in metric_names}} for e in eval_history
    ]
    panels = (
        ("loss", ("loss",)),
        ("dev metrics", tuple(f"dev {k}" for k in metric_names)),
        ("learning rate", ("learning_rate",)),
    )
    return plots.plot_history(points, path, title=f"BERT fine-tuning: {task_name}", panels=panels)


def _check_resume(start_step, loop):
    if start_step % loop:
        raise ValueError(
            f"The checkpoint is at step {start_step}, not a multiple of the {loop} steps of a "
            f"logging loop; resume with the settings it was made with."
        )


def _distribute(strategy, feats, batches, padded, label_keys):
    """The training dataset of a batch plan, split over the strategy's replicas (row r::R
    of each global batch to replica r, every replica padded to the global batch's length)."""
    replicas = strategy.num_replicas_in_sync
    if distribution.is_keras_distribution(strategy):  # JAX: Keras splits each global batch.
        distribution.check_batch(len(batches[0]) if batches else replicas, strategy)
        local = strategy.process_batches(batches)  # Several hosts: this host's rows.
        return feature_lib.make_dataset(feats, local, padded, label_keys=label_keys)
    if replicas == 1 and not isinstance(strategy, tf.distribute.TPUStrategy):
        return feature_lib.make_dataset(feats, batches, padded, label_keys=label_keys)

    def dataset_fn(context):
        per_pipeline = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * per_pipeline
        return feature_lib.make_dataset(
            feats,
            batches,
            padded,
            num_replicas=replicas,
            replica_range=(first, first + per_pipeline),
            label_keys=label_keys,
        )

    return strategy.distribute_datasets_from_function(dataset_fn)
